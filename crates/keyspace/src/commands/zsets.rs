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
use super::typed;
use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::value::{SetValue, Value, ZSetValue};
use crate::zset::{Change, Entry};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::{Frame, Protocol};
use std::borrow::Cow;
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
        // Unlike BZPOPMIN and BLPOP, Redis lets scripts call the MPOP forms
        // (which then never block).
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
        WRITE | NOSCRIPT | FAST | BLOCKING,
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
        WRITE | NOSCRIPT | FAST | BLOCKING,
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
    if text
        .bytes()
        .all(|byte| matches!(byte, b'0'..=b'9' | b'.' | b'+' | b'-' | b'e' | b'E'))
    {
        // Digits and signs only (the usual score): no infinity or NaN can be
        // spelled, and case does not matter, so no lowercase copy is made.
        let unsigned = text.trim_start_matches(['+', '-']);
        if text.len() - unsigned.len() > 1 {
            return None;
        }
        let value = unsigned.parse::<f64>().ok()?;
        return Some(if text.starts_with('-') { -value } else { value });
    }
    parse_float_body_spelled(text)
}

/// [`parse_float_body`] for any text: `inf` and the like in any case.
fn parse_float_body_spelled(text: &str) -> Option<f64> {
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

/// A non-negative count (`getPositiveLongFromObjectOrReply`): anything else,
/// not an integer included, is answered with `error`.
fn parse_non_negative(argument: &[u8], error: &'static str) -> Result<usize, Frame> {
    match crate::value::canonical_i64(argument) {
        Some(value) if value >= 0 => Ok(usize::try_from(value).unwrap_or(usize::MAX)),
        _ => Err(Frame::error(error)),
    }
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
    /// How many entries come first in ascending order and satisfy `before`
    /// (one of this selector's tests). A lex range over members of different
    /// scores need not select a contiguous run, so its boundary is searched
    /// by rank (see [`ZSetValue::partition_point_by_rank`]): every replica
    /// finds the same one whatever its tree's shape.
    fn boundary(&self, zset: &ZSetValue, before: impl Fn(&Entry) -> bool) -> usize {
        match self {
            Selector::Lex(_) => zset.partition_point_by_rank(before),
            _ => zset.partition_point(before),
        }
    }

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
    let first = selector.boundary(zset, |entry| selector.before_start(entry));
    let end = selector.boundary(zset, |entry| selector.before_end(entry));
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
        let end = selector.boundary(zset, |entry| selector.before_end(entry));
        let Some(start) = end.checked_sub(1 + offset) else {
            return Vec::new();
        };
        zset.iter_from(start, true)
            .take_while(|entry| !selector.before_start(entry))
            .take(limit)
            .collect()
    } else {
        let first = selector.boundary(zset, |entry| selector.before_start(entry));
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
    let created = match typed::write::<ZSetValue>(keyspace, context, key) {
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
    let Ok(Some(zset)) = typed::write::<ZSetValue>(keyspace, context, key) else {
        return Frame::error(errors::WRONGTYPE);
    };
    let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
    let mut last_score = 0.0;
    for (pair, &score) in pairs.chunks_exact(2).zip(&scores) {
        let member = &pair[1];
        let decided = zset.set_with(member, |current| match current {
            Some(_) if nx => Ok(None),
            Some(current) => {
                let new_score = if incr { current + score } else { score };
                if new_score.is_nan() {
                    return Err(Frame::error(NAN_RESULT));
                }
                if (lt && new_score >= current) || (gt && new_score <= current) {
                    return Ok(None);
                }
                processed += 1;
                last_score = new_score;
                Ok(Some(new_score))
            }
            None if xx => Ok(None),
            None => {
                processed += 1;
                last_score = score;
                Ok(Some(score))
            }
        });
        match decided {
            Ok(Change::Added) => added += 1,
            Ok(Change::Updated) => updated += 1,
            Ok(Change::Unchanged) => {}
            Err(error) => return error,
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

pub(super) fn zadd(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    zadd_generic(keyspace, context, arguments, false)
}

fn zincrby(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    zadd_generic(keyspace, context, arguments, true)
}

// ---- ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK --------------------------------------------

fn zrem(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let (removed, emptied) = match typed::write::<ZSetValue>(keyspace, context, key) {
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
    match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => Frame::Integer(zset.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn zscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset.score(&arguments[2]).map_or(Frame::Null, score_frame),
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn zmscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[source_index]) {
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
    match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let (removed, emptied) = match typed::write::<ZSetValue>(keyspace, context, key) {
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
        let (popped, emptied) = match typed::write::<ZSetValue>(keyspace, context, key)? {
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
        return match typed::write::<ZSetValue>(keyspace, context, &arguments[1]) {
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

/// An input of a set operation: a sorted set, a plain set (each member scoring
/// 1, as Redis takes it), or nothing for an absent key.
struct Source<'a> {
    input: Input<'a>,
    weight: f64,
}

enum Input<'a> {
    Absent,
    ZSet(&'a ZSetValue),
    Set(&'a SetValue),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self.input {
            Input::Absent => 0,
            Input::ZSet(zset) => zset.len(),
            Input::Set(set) => set.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self.input {
            Input::Absent => None,
            Input::ZSet(zset) => zset.score(member),
            Input::Set(set) => set.contains(member).then_some(1.0),
        }
    }

    /// Every (score, member), in the input's own order.
    fn entries(&self) -> Box<dyn Iterator<Item = (f64, Cow<'_, [u8]>)> + '_> {
        match self.input {
            Input::Absent => Box::new(std::iter::empty()),
            Input::ZSet(zset) => Box::new(
                zset.iter()
                    .map(|entry| (entry.score, Cow::Borrowed(entry.member()))),
            ),
            Input::Set(set) => Box::new(set.members().map(|member| (1.0, member))),
        }
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
    'members: for (score, member) in smallest.entries() {
        let mut score = weighted(score, smallest.weight);
        for other in others {
            let Some(found) = other.score(&member) else {
                continue 'members;
            };
            // Unlike the first input's, a later input's weighted score is
            // aggregated as it is, NaN (0 * inf) included, as Redis does: a
            // sum then becomes 0, a minimum or maximum keeps what it had.
            aggregate.apply(&mut score, found * other.weight);
        }
        count += 1;
        if count_only {
            if limit != 0 && count >= limit {
                break;
            }
        } else {
            result.push(Entry::new(score, &member));
        }
    }
    (result, count)
}

fn unite(sources: &[Source<'_>], aggregate: Aggregate) -> Vec<Entry> {
    let mut accumulated: BTreeMap<Cow<'_, [u8]>, f64> = BTreeMap::new();
    for source in sources {
        for (score, member) in source.entries() {
            let score = weighted(score, source.weight);
            accumulated
                .entry(member)
                .and_modify(|total| aggregate.apply(total, score))
                .or_insert(score);
        }
    }
    accumulated
        .into_iter()
        .map(|(member, score)| Entry::new(score, &member))
        .collect()
}

fn subtract(sources: &[Source<'_>]) -> Vec<Entry> {
    let Some((first, others)) = sources.split_first() else {
        return Vec::new();
    };
    first
        .entries()
        .filter(|(_, member)| others.iter().all(|other| other.score(member).is_none()))
        .map(|(score, member)| Entry::new(score, &member))
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
            Some(entry) if !matches!(entry.value, Value::ZSet(_) | Value::Set(_)) => {
                return Frame::error(errors::WRONGTYPE)
            }
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
            input: match db.peek(key, context.now_ms).map(|entry| &entry.value) {
                Some(Value::ZSet(zset)) => Input::ZSet(zset),
                Some(Value::Set(set)) => Input::Set(set),
                _ => Input::Absent,
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
        return match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let zset = match typed::read::<ZSetValue>(keyspace, context, &arguments[1]) {
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
    let mut visit = |member: &[u8], score: f64| {
        if pattern.is_none_or(|pattern| glob_match(pattern, member, false)) {
            items.push(Frame::bulk_from_slice(member));
            items.push(Frame::Bulk(Bytes::from(resp::format_double(score))));
        }
    };
    let next = if context.in_script {
        // A skiplist's index is laid out by its history, which a replica
        // that loaded a snapshot does not share, and a script runs on every
        // replica: it gets the whole set in one step, in score order, so
        // every replica computes the same (SCAN may return an element more
        // than once, so a continued cursor starts over).
        for entry in zset.iter() {
            visit(entry.member(), entry.score);
        }
        0
    } else {
        zset.scan(cursor, usize::try_from(count).unwrap_or(usize::MAX), visit)
    };
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(items),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Harness;

    /// The digits-only shortcut reads every text as the general parse does:
    /// signs, exponents, dots, overflow, and malformed texts alike.
    #[test]
    fn the_digit_shortcut_parses_as_the_general_float_parse() {
        let alphabet = b"0123456789.+-eE";
        let mut texts: Vec<String> = [
            "1",
            "-1",
            "+1",
            "--1",
            "+-1",
            "1.5",
            ".5",
            "5.",
            ".",
            "",
            "-",
            "+",
            "1e5",
            "1E5",
            "1e-5",
            "1e+5",
            "1e",
            "e1",
            "1e999",
            "-1e999",
            "1e-999",
            "0",
            "-0",
            "00012",
            "1.2.3",
            "1-2",
            "1e5e5",
            "9007199254740993",
        ]
        .iter()
        .map(|text| text.to_string())
        .collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let length = (state % 7) as usize;
            let text: String = (0..length)
                .map(|index| {
                    let pick = (state >> (8 + index * 5)) as usize % alphabet.len();
                    alphabet[pick] as char
                })
                .collect();
            texts.push(text);
        }
        for text in &texts {
            let fast = parse_float_body(text).map(f64::to_bits);
            let general = parse_float_body_spelled(text).map(f64::to_bits);
            assert_eq!(fast, general, "{text:?}");
        }
    }

    /// A lex range over members of different scores (undefined in Redis)
    /// answers the same on a set built member by member and on its copy
    /// rebuilt in one go (as a replica restoring a snapshot or RESTORE does,
    /// with another tree shape), and on the listpack form: replicas agree on
    /// what ZREMRANGEBYLEX removes.
    #[test]
    fn lex_ranges_over_mixed_scores_do_not_depend_on_the_tree_shape() {
        let mut h = Harness::new();
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 33
        };
        let count = 3000;
        let members: Vec<(u64, u64)> = (0..count).map(|index| (next() % 50, index)).collect();
        for (score, index) in &members {
            h.run(&["ZADD", "grown", &score.to_string(), &format!("m{index:05}")]);
        }
        let Frame::Bulk(dump) = h.run(&["DUMP", "grown"]) else {
            panic!("DUMP answers a payload")
        };
        let arguments = [
            bytes::Bytes::from_static(b"RESTORE"),
            bytes::Bytes::from_static(b"rebuilt"),
            bytes::Bytes::from_static(b"0"),
            dump,
        ];
        assert_eq!(h.run_arguments(&arguments), Frame::OK);
        for (min, max) in [
            ("[m00100", "[m00900"),
            ("(m01500", "+"),
            ("-", "(m00042"),
            ("[m02000", "[m02999"),
        ] {
            let grown = h.run(&["ZRANGEBYLEX", "grown", min, max]);
            let rebuilt = h.run(&["ZRANGEBYLEX", "rebuilt", min, max]);
            assert_eq!(grown, rebuilt, "ZRANGEBYLEX {min} {max}");
            let grown = h.run(&["ZLEXCOUNT", "grown", min, max]);
            assert_eq!(
                grown,
                h.run(&["ZLEXCOUNT", "rebuilt", min, max]),
                "ZLEXCOUNT {min} {max}"
            );
        }
        assert_eq!(
            h.run(&["ZREMRANGEBYLEX", "grown", "[m00100", "[m00900"]),
            h.run(&["ZREMRANGEBYLEX", "rebuilt", "[m00100", "[m00900"])
        );
        assert_eq!(
            h.run(&["ZRANGE", "grown", "0", "-1"]),
            h.run(&["ZRANGE", "rebuilt", "0", "-1"])
        );
    }

    /// Runs a command and answers its reply as it goes on the wire in `protocol`.
    /// An infinite score times a weight of 0 is NaN: taken as 0 for the
    /// first input of an intersection, but aggregated as NaN for the later
    /// ones (a sum becomes 0 there, then goes on), as Redis computes it.
    #[test]
    fn intersections_aggregate_a_later_inputs_nan_as_redis_does() {
        let mut h = Harness::new();
        h.run(&["ZADD", "z", "inf", "a", "1", "b"]);
        h.run(&[
            "ZINTERSTORE",
            "sum",
            "3",
            "z",
            "z",
            "z",
            "WEIGHTS",
            "-1",
            "0",
            "1000",
        ]);
        // a: -inf, then -inf + NaN -> 0, then 0 + inf; b: -1 + 0 + 1000.
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "sum", "0", "-1", "WITHSCORES"]),
            bulks(&["b", "999", "a", "inf"])
        );
        h.run(&[
            "ZINTERSTORE",
            "max",
            "2",
            "z",
            "z",
            "WEIGHTS",
            "-1",
            "0",
            "AGGREGATE",
            "MAX",
        ]);
        // A NaN is never greater: a keeps -inf.
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "max", "0", "-1", "WITHSCORES"]),
            bulks(&["a", "-inf", "b", "0"])
        );
        // The first input's NaN is 0: 0 + -inf.
        h.run(&["ZINTERSTORE", "first", "2", "z", "z", "WEIGHTS", "0", "-1"]);
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "first", "0", "-1", "WITHSCORES"]),
            bulks(&["a", "-inf", "b", "-1"])
        );
    }

    fn wire_in(h: &mut Harness, protocol: Protocol, words: &[&str]) -> String {
        h.context.protocol = protocol;
        let reply = h.run(words);
        h.context.protocol = Protocol::Resp2;
        let mut out = bytes::BytesMut::new();
        resp::encode(&reply, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn resp2(h: &mut Harness, words: &[&str]) -> String {
        wire_in(h, Protocol::Resp2, words)
    }

    fn resp3(h: &mut Harness, words: &[&str]) -> String {
        wire_in(h, Protocol::Resp3, words)
    }

    /// A RESP2 array of bulk strings.
    fn bulks(items: &[&str]) -> String {
        let mut out = format!("*{}\r\n", items.len());
        for item in items {
            out.push_str(&format!("${}\r\n{item}\r\n", item.len()));
        }
        out
    }

    fn err(text: &str) -> String {
        format!("-{text}\r\n")
    }

    fn int(value: i64) -> String {
        format!(":{value}\r\n")
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const SYNTAX: &str = "ERR syntax error";
    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    const NOT_FLOAT: &str = "ERR value is not a valid float";

    fn sample(h: &mut Harness) {
        h.run(&[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "3", "cc", "-inf", "low",
        ]);
    }

    // ---- Table ---------------------------------------------------------------------

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        for (name, arity, range) in [
            ("zadd", -4, (1, 1, 1)),
            ("zincrby", 4, (1, 1, 1)),
            ("zrem", -3, (1, 1, 1)),
            ("zcard", 2, (1, 1, 1)),
            ("zscore", 3, (1, 1, 1)),
            ("zmscore", -3, (1, 1, 1)),
            ("zrank", -3, (1, 1, 1)),
            ("zrevrank", -3, (1, 1, 1)),
            ("zrange", -4, (1, 1, 1)),
            ("zrangestore", -5, (1, 2, 1)),
            ("zrangebyscore", -4, (1, 1, 1)),
            ("zrevrangebyscore", -4, (1, 1, 1)),
            ("zrangebylex", -4, (1, 1, 1)),
            ("zrevrangebylex", -4, (1, 1, 1)),
            ("zrevrange", -4, (1, 1, 1)),
            ("zcount", 4, (1, 1, 1)),
            ("zlexcount", 4, (1, 1, 1)),
            ("zremrangebyscore", 4, (1, 1, 1)),
            ("zremrangebyrank", 4, (1, 1, 1)),
            ("zremrangebylex", 4, (1, 1, 1)),
            ("zpopmin", -2, (1, 1, 1)),
            ("zpopmax", -2, (1, 1, 1)),
            ("bzpopmin", -3, (1, -2, 1)),
            ("bzpopmax", -3, (1, -2, 1)),
            ("zmpop", -4, (0, 0, 0)),
            ("bzmpop", -5, (0, 0, 0)),
            ("zunion", -3, (0, 0, 0)),
            ("zinter", -3, (0, 0, 0)),
            ("zdiff", -3, (0, 0, 0)),
            ("zunionstore", -4, (1, 1, 1)),
            ("zinterstore", -4, (1, 1, 1)),
            ("zdiffstore", -4, (1, 1, 1)),
            ("zintercard", -3, (0, 0, 0)),
            ("zrandmember", -2, (1, 1, 1)),
            ("zscan", -3, (1, 1, 1)),
        ] {
            assert_eq!(spec(name).arity, arity, "{name}");
            assert_eq!(spec(name).legacy_key_range(), range, "{name}");
            assert_eq!(spec(name).group, "sorted_set", "{name}");
            assert!(spec(name).categories.contains(&"sortedset"), "{name}");
        }
        for name in ["bzpopmin", "bzpopmax", "bzmpop"] {
            assert!(spec(name).has(BLOCKING), "{name}");
        }
        assert!(spec("zadd").is_write() && !spec("zrange").is_write());
        assert!(spec("zrangestore").is_write() && spec("zunionstore").is_write());
        let keys = |words: &[&str]| {
            let arguments: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            spec(words[0]).key_positions(&arguments).unwrap()
        };
        assert_eq!(
            keys(&["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"]),
            [1, 3, 4]
        );
        assert_eq!(keys(&["zinter", "2", "a", "b"]), [2, 3]);
        assert_eq!(keys(&["bzmpop", "0", "2", "a", "b", "MIN"]), [3, 4]);
        assert_eq!(keys(&["zrangestore", "d", "s", "0", "-1"]), [1, 2]);
    }

    // ---- ZADD, ZINCRBY ----------------------------------------------------------------

    #[test]
    fn zadd_options_and_replies() {
        let mut h = Harness::new();
        assert_eq!(resp2(&mut h, &["ZADD", "z", "1", "a", "2", "b"]), int(2));
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "1", "a", "5", "b", "3", "c"]),
            int(1)
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "CH", "1", "a", "6", "b", "4", "d"]),
            int(2)
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "NX", "9", "a", "9", "e"]),
            int(1)
        );
        assert_eq!(resp2(&mut h, &["ZSCORE", "z", "a"]), "$1\r\n1\r\n");
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "XX", "CH", "7", "a", "7", "new"]),
            int(1)
        );
        assert_eq!(resp2(&mut h, &["ZSCORE", "z", "new"]), "$-1\r\n");
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "GT", "CH", "1", "a", "8", "b"]),
            int(1)
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "LT", "CH", "100", "a", "0.5", "b"]),
            int(1)
        );
        // GT/LT still add new members.
        assert_eq!(resp2(&mut h, &["ZADD", "z", "GT", "1", "fresh"]), int(1));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
            bulks(&["b", "0.5", "fresh", "1", "c", "3", "d", "4", "a", "7", "e", "9"])
        );
        assert_eq!(resp2(&mut h, &["ZADD", "z", "XX", "1", "nope"]), int(0));
        assert_eq!(resp2(&mut h, &["ZADD", "missing", "XX", "1", "a"]), int(0));
        assert_eq!(resp2(&mut h, &["EXISTS", "missing"]), int(0));
        assert_eq!(resp2(&mut h, &["TYPE", "z"]), "+zset\r\n");
        assert_eq!(
            resp2(&mut h, &["OBJECT", "ENCODING", "z"]),
            "$8\r\nlistpack\r\n"
        );
    }

    #[test]
    fn zadd_errors_in_redis_order() {
        let mut h = Harness::new();
        h.set("s", "v");
        for (words, expected) in [
            (
                &["ZADD", "z", "1"][..],
                "ERR wrong number of arguments for 'zadd' command",
            ),
            (&["ZADD", "z", "NX", "XX"], SYNTAX),
            (&["ZADD", "z", "1", "a", "2"], SYNTAX),
            (
                &["ZADD", "z", "NX", "XX", "1", "a"],
                "ERR XX and NX options at the same time are not compatible",
            ),
            (
                &["ZADD", "z", "NX", "GT", "1", "a"],
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            ),
            (
                &["ZADD", "z", "GT", "LT", "1", "a"],
                "ERR GT, LT, and/or NX options at the same time are not compatible",
            ),
            (
                &["ZADD", "z", "INCR", "1", "a", "2", "b"],
                "ERR INCR option supports a single increment-element pair",
            ),
            (&["ZADD", "z", "1", "a", "x", "b"], NOT_FLOAT),
            (&["ZADD", "z", "nan", "a"], NOT_FLOAT),
            (&["ZADD", "z", " 1", "a"], NOT_FLOAT),
            (&["ZADD", "z", "1e400", "a"], NOT_FLOAT),
            (&["ZADD", "z", "", "a"], NOT_FLOAT),
            // Scores are checked before the type.
            (&["ZADD", "s", "x", "a"], NOT_FLOAT),
            (&["ZADD", "s", "1", "a"], WRONGTYPE),
            (&["ZINCRBY", "s", "1", "a"], WRONGTYPE),
            (&["ZINCRBY", "z", "one", "a"], NOT_FLOAT),
        ] {
            assert_eq!(resp2(&mut h, words), err(expected), "{words:?}");
        }
        assert_eq!(resp2(&mut h, &["EXISTS", "z"]), int(0));
        // Accepted spellings.
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZADD",
                    "z",
                    "+inf",
                    "a",
                    "-Infinity",
                    "b",
                    "1E2",
                    "c",
                    ".5",
                    "d"
                ]
            ),
            int(4)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
            bulks(&["b", "-inf", "d", "0.5", "c", "100", "a", "inf"])
        );
    }

    #[test]
    fn incr_and_zincrby() {
        let mut h = Harness::new();
        assert_eq!(
            resp2(&mut h, &["ZINCRBY", "z", "2.5", "a"]),
            "$3\r\n2.5\r\n"
        );
        assert_eq!(resp3(&mut h, &["ZINCRBY", "z", "0.1", "a"]), ",2.6\r\n");
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "INCR", "1", "a"]),
            "$3\r\n3.6\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "NX", "INCR", "1", "a"]),
            "$-1\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZADD", "z", "XX", "INCR", "1", "b"]),
            "_\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "GT", "INCR", "-1", "a"]),
            "$-1\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZADD", "z", "LT", "INCR", "-1", "a"]),
            "$3\r\n2.6\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZINCRBY", "z", "+inf", "a"]),
            "$3\r\ninf\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZINCRBY", "z", "-inf", "a"]),
            err("ERR resulting score is not a number (NaN)")
        );
        assert_eq!(resp2(&mut h, &["ZSCORE", "z", "a"]), "$3\r\ninf\r\n");
        assert_eq!(
            resp2(&mut h, &["ZINCRBY", "z", "1", "a", "b"]),
            err("ERR wrong number of arguments for 'zincrby' command")
        );
    }

    // ---- Reads --------------------------------------------------------------------------

    #[test]
    fn scores_ranks_and_cards_in_both_protocols() {
        let mut h = Harness::new();
        sample(&mut h);
        assert_eq!(resp2(&mut h, &["ZCARD", "z"]), int(5));
        assert_eq!(resp2(&mut h, &["ZCARD", "missing"]), int(0));
        assert_eq!(resp2(&mut h, &["ZSCORE", "z", "low"]), "$4\r\n-inf\r\n");
        assert_eq!(resp3(&mut h, &["ZSCORE", "z", "c"]), ",3\r\n");
        assert_eq!(resp3(&mut h, &["ZSCORE", "z", "nope"]), "_\r\n");
        assert_eq!(resp3(&mut h, &["ZSCORE", "missing", "a"]), "_\r\n");
        assert_eq!(
            resp2(&mut h, &["ZMSCORE", "z", "a", "nope", "b"]),
            "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZMSCORE", "z", "a", "nope"]),
            "*2\r\n,1\r\n_\r\n"
        );
        assert_eq!(resp2(&mut h, &["ZMSCORE", "missing", "a"]), "*1\r\n$-1\r\n");
        assert_eq!(resp2(&mut h, &["ZRANK", "z", "low"]), int(0));
        assert_eq!(resp2(&mut h, &["ZRANK", "z", "cc"]), int(4));
        assert_eq!(resp2(&mut h, &["ZREVRANK", "z", "cc"]), int(0));
        assert_eq!(resp2(&mut h, &["ZRANK", "z", "nope"]), "$-1\r\n");
        assert_eq!(
            resp2(&mut h, &["ZRANK", "z", "b", "WITHSCORE"]),
            "*2\r\n:2\r\n$1\r\n2\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZREVRANK", "z", "b", "withscore"]),
            "*2\r\n:2\r\n,2\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZRANK", "z", "nope", "WITHSCORE"]),
            "*-1\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZRANK", "missing", "a", "WITHSCORE"]),
            "_\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZRANK", "z", "a", "WITHSCORES"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANK", "z", "a", "WITHSCORE", "x"]),
            err("ERR wrong number of arguments for 'zrank' command")
        );
        assert_eq!(
            resp2(&mut h, &["ZREVRANK", "z", "a", "WITHSCORE", "x"]),
            err("ERR wrong number of arguments for 'zrevrank' command")
        );
    }

    #[test]
    fn zrange_by_rank() {
        let mut h = Harness::new();
        sample(&mut h);
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "-1"]),
            bulks(&["low", "a", "b", "c", "cc"])
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "1", "2"]),
            bulks(&["a", "b"])
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "-2", "100"]),
            bulks(&["c", "cc"])
        );
        assert_eq!(resp2(&mut h, &["ZRANGE", "z", "3", "1"]), bulks(&[]));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "REV"]),
            bulks(&["cc", "c"])
        );
        assert_eq!(
            resp2(&mut h, &["ZREVRANGE", "z", "1", "-2"]),
            bulks(&["c", "b", "a"])
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
            bulks(&["low", "-inf", "a", "1"])
        );
        assert_eq!(
            resp3(&mut h, &["ZRANGE", "z", "0", "1", "WITHSCORES"]),
            "*2\r\n*2\r\n$3\r\nlow\r\n,-inf\r\n*2\r\n$1\r\na\r\n,1\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZREVRANGE", "z", "0", "0", "WITHSCORES"]),
            "*1\r\n*2\r\n$2\r\ncc\r\n,3\r\n"
        );
        assert_eq!(resp3(&mut h, &["ZRANGE", "missing", "0", "-1"]), "*0\r\n");
        assert_eq!(resp2(&mut h, &["ZRANGE", "z", "0", "x"]), err(NOT_INTEGER));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"]),
            err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
        );
        // As Redis: a count of -1 is no LIMIT at all.
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "0", "LIMIT", "5", "-1"]),
            bulks(&["low"])
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "BOGUS"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZREVRANGE", "z", "0", "1", "REV"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "LIMIT", "0"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "1", "LIMIT", "x", "1"]),
            err(NOT_INTEGER)
        );
    }

    #[test]
    fn zrange_by_score() {
        let mut h = Harness::new();
        sample(&mut h);
        for (words, expected) in [
            (
                &["ZRANGEBYSCORE", "z", "-inf", "+inf"][..],
                &["low", "a", "b", "c", "cc"][..],
            ),
            (&["ZRANGEBYSCORE", "z", "(1", "3"], &["b", "c", "cc"]),
            (&["ZRANGEBYSCORE", "z", "1", "(3"], &["a", "b"]),
            (&["ZRANGEBYSCORE", "z", "(1", "(2"], &[]),
            (&["ZRANGEBYSCORE", "z", "3", "1"], &[]),
            (
                &["ZRANGEBYSCORE", "z", "-inf", "2", "LIMIT", "1", "2"],
                &["a", "b"],
            ),
            (
                &["ZRANGEBYSCORE", "z", "-inf", "2", "LIMIT", "1", "-5"],
                &["a", "b"],
            ),
            (
                &["ZRANGEBYSCORE", "z", "-inf", "2", "LIMIT", "-1", "2"],
                &[],
            ),
            (&["ZRANGEBYSCORE", "z", "-inf", "2", "LIMIT", "5", "2"], &[]),
            (&["ZRANGEBYSCORE", "z", "-inf", "2", "LIMIT", "0", "0"], &[]),
            (
                &["ZREVRANGEBYSCORE", "z", "+inf", "-inf"],
                &["cc", "c", "b", "a", "low"],
            ),
            (
                &["ZREVRANGEBYSCORE", "z", "3", "(1", "LIMIT", "1", "1"],
                &["c"],
            ),
            (&["ZREVRANGEBYSCORE", "z", "(3", "-inf"], &["b", "a", "low"]),
            (
                &["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "1", "1"],
                &["c"],
            ),
            (
                &["ZRANGE", "z", "+inf", "(1", "BYSCORE", "REV"],
                &["cc", "c", "b"],
            ),
            // strtod's reading: leading spaces pass, an empty bound is 0.
            (&["ZRANGEBYSCORE", "z", " 1", "( 2"], &["a"]),
            (&["ZRANGEBYSCORE", "z", "(", "1"], &["a"]),
        ] {
            assert_eq!(resp2(&mut h, words), bulks(expected), "{words:?}");
        }
        assert_eq!(
            resp2(&mut h, &["ZRANGEBYSCORE", "z", "1", "2", "WITHSCORES"]),
            bulks(&["a", "1", "b", "2"])
        );
        assert_eq!(
            resp3(
                &mut h,
                &[
                    "ZREVRANGEBYSCORE",
                    "z",
                    "2",
                    "1",
                    "WITHSCORES",
                    "LIMIT",
                    "0",
                    "1"
                ]
            ),
            "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
        );
        let not_float = err("ERR min or max is not a float");
        for words in [
            &["ZRANGEBYSCORE", "z", "x", "1"][..],
            &["ZRANGEBYSCORE", "z", "1", "nan"],
            &["ZRANGEBYSCORE", "z", "1 ", "2"],
            &["ZRANGE", "z", "[1", "2", "BYSCORE"],
            &["ZCOUNT", "z", "((1", "2"],
        ] {
            assert_eq!(resp2(&mut h, words), not_float, "{words:?}");
        }
        assert_eq!(
            resp2(&mut h, &["ZRANGEBYSCORE", "z", "1", "2", "BYSCORE"]),
            err(SYNTAX)
        );
        assert_eq!(resp2(&mut h, &["ZCOUNT", "z", "-inf", "+inf"]), int(5));
        assert_eq!(resp2(&mut h, &["ZCOUNT", "z", "(1", "3"]), int(3));
        assert_eq!(resp2(&mut h, &["ZCOUNT", "z", "5", "1"]), int(0));
        assert_eq!(resp2(&mut h, &["ZCOUNT", "missing", "0", "1"]), int(0));
    }

    #[test]
    fn zrange_by_lex() {
        let mut h = Harness::new();
        h.run(&[
            "ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "bb",
        ]);
        for (words, expected) in [
            (
                &["ZRANGEBYLEX", "l", "-", "+"][..],
                &["a", "b", "bb", "c", "d", "e"][..],
            ),
            (&["ZRANGEBYLEX", "l", "[b", "(d"], &["b", "bb", "c"]),
            (&["ZRANGEBYLEX", "l", "(b", "[d"], &["bb", "c", "d"]),
            (&["ZRANGEBYLEX", "l", "+", "-"], &[]),
            (&["ZRANGEBYLEX", "l", "[c", "[b"], &[]),
            (
                &["ZRANGEBYLEX", "l", "-", "+", "LIMIT", "2", "2"],
                &["bb", "c"],
            ),
            (
                &["ZREVRANGEBYLEX", "l", "+", "-"],
                &["e", "d", "c", "bb", "b", "a"],
            ),
            (
                &["ZREVRANGEBYLEX", "l", "(d", "[b", "LIMIT", "1", "5"],
                &["bb", "b"],
            ),
            (
                &["ZRANGE", "l", "[e", "[c", "BYLEX", "REV"],
                &["e", "d", "c"],
            ),
            (&["ZRANGE", "l", "[", "(b", "BYLEX"], &["a"]),
        ] {
            assert_eq!(resp2(&mut h, words), bulks(expected), "{words:?}");
        }
        let bad = err("ERR min or max not valid string range item");
        for words in [
            &["ZRANGEBYLEX", "l", "a", "+"][..],
            &["ZRANGEBYLEX", "l", "-", ""],
            &["ZRANGEBYLEX", "l", "--", "+"],
            &["ZLEXCOUNT", "l", "[a", "++"],
            &["ZREMRANGEBYLEX", "l", "(a", "z"],
        ] {
            assert_eq!(resp2(&mut h, words), bad, "{words:?}");
        }
        assert_eq!(
            resp2(&mut h, &["ZRANGEBYLEX", "l", "-", "+", "WITHSCORES"]),
            err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "l", "-", "+", "BYLEX", "WITHSCORES"]),
            err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
        );
        assert_eq!(resp2(&mut h, &["ZLEXCOUNT", "l", "[b", "[c"]), int(3));
        assert_eq!(resp2(&mut h, &["ZLEXCOUNT", "l", "-", "+"]), int(6));
        assert_eq!(resp2(&mut h, &["ZLEXCOUNT", "l", "(e", "+"]), int(0));
    }

    #[test]
    fn zrangestore() {
        let mut h = Harness::new();
        sample(&mut h);
        h.set("dst", "a string");
        h.run(&["EXPIRE", "dst", "100"]);
        assert_eq!(
            resp2(&mut h, &["ZRANGESTORE", "dst", "z", "1", "2"]),
            int(2)
        );
        assert_eq!(resp2(&mut h, &["TTL", "dst"]), int(-1));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
            bulks(&["a", "1", "b", "2"])
        );
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZRANGESTORE",
                    "dst",
                    "z",
                    "(1",
                    "+inf",
                    "BYSCORE",
                    "LIMIT",
                    "0",
                    "2"
                ]
            ),
            int(2)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "dst", "0", "-1"]),
            bulks(&["b", "c"])
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGESTORE", "dst", "z", "0", "0", "REV"]),
            int(1)
        );
        assert_eq!(resp2(&mut h, &["ZRANGE", "dst", "0", "-1"]), bulks(&["cc"]));
        // Empty results and missing sources delete the destination.
        assert_eq!(
            resp2(&mut h, &["ZRANGESTORE", "dst", "z", "10", "20"]),
            int(0)
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "dst"]), int(0));
        h.run(&["ZADD", "dst", "1", "x"]);
        assert_eq!(
            resp2(&mut h, &["ZRANGESTORE", "dst", "missing", "0", "-1"]),
            int(0)
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "dst"]), int(0));
        assert_eq!(
            resp2(
                &mut h,
                &["ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"]
            ),
            err(SYNTAX)
        );
        h.set("s", "v");
        assert_eq!(
            resp2(&mut h, &["ZRANGESTORE", "dst", "s", "0", "-1"]),
            err(WRONGTYPE)
        );
        // The source may be the destination.
        assert_eq!(resp2(&mut h, &["ZRANGESTORE", "z", "z", "0", "1"]), int(2));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "-1"]),
            bulks(&["low", "a"])
        );
    }

    // ---- Removals ------------------------------------------------------------------------

    #[test]
    fn zrem_and_remove_ranges() {
        let mut h = Harness::new();
        sample(&mut h);
        assert_eq!(resp2(&mut h, &["ZREM", "z", "a", "nope", "a"]), int(1));
        assert_eq!(resp2(&mut h, &["ZREM", "missing", "a"]), int(0));
        assert_eq!(resp2(&mut h, &["ZREMRANGEBYSCORE", "z", "(2", "3"]), int(2));
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "z", "0", "-1"]),
            bulks(&["low", "b"])
        );
        assert_eq!(resp2(&mut h, &["ZREMRANGEBYRANK", "z", "-1", "-1"]), int(1));
        assert_eq!(resp2(&mut h, &["ZREMRANGEBYRANK", "z", "5", "10"]), int(0));
        assert_eq!(
            resp2(&mut h, &["ZREMRANGEBYRANK", "z", "0", "x"]),
            err(NOT_INTEGER)
        );
        assert_eq!(
            resp2(&mut h, &["ZREMRANGEBYSCORE", "z", "x", "1"]),
            err("ERR min or max is not a float")
        );
        assert_eq!(
            resp2(&mut h, &["ZREMRANGEBYSCORE", "z", "-inf", "(-inf"]),
            int(0)
        );
        assert_eq!(
            resp2(&mut h, &["ZREMRANGEBYSCORE", "z", "-inf", "-inf"]),
            int(1)
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "z"]), int(0));
        h.run(&["ZADD", "l", "0", "a", "0", "b", "0", "c"]);
        assert_eq!(resp2(&mut h, &["ZREMRANGEBYLEX", "l", "(a", "+"]), int(2));
        assert_eq!(resp2(&mut h, &["ZREM", "l", "a", "b"]), int(1));
        assert_eq!(resp2(&mut h, &["EXISTS", "l"]), int(0));
        assert_eq!(
            resp2(&mut h, &["ZREMRANGEBYRANK", "missing", "0", "-1"]),
            int(0)
        );
    }

    // ---- Pops ----------------------------------------------------------------------------------

    #[test]
    fn pops_in_both_protocols() {
        let mut h = Harness::new();
        sample(&mut h);
        assert_eq!(resp2(&mut h, &["ZPOPMIN", "z"]), bulks(&["low", "-inf"]));
        assert_eq!(resp3(&mut h, &["ZPOPMAX", "z"]), "*2\r\n$2\r\ncc\r\n,3\r\n");
        assert_eq!(
            resp2(&mut h, &["ZPOPMIN", "z", "2"]),
            bulks(&["a", "1", "b", "2"])
        );
        h.run(&["ZADD", "z", "1", "a", "2", "b"]);
        assert_eq!(
            resp3(&mut h, &["ZPOPMIN", "z", "2"]),
            "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
        );
        assert_eq!(resp3(&mut h, &["ZPOPMAX", "z", "0"]), "*0\r\n");
        assert_eq!(
            resp3(&mut h, &["ZPOPMAX", "z", "10"]),
            "*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "z"]), int(0));
        assert_eq!(resp2(&mut h, &["ZPOPMIN", "z"]), "*0\r\n");
        assert_eq!(resp3(&mut h, &["ZPOPMIN", "z", "3"]), "*0\r\n");
        assert_eq!(
            resp2(&mut h, &["ZPOPMIN", "z", "-1"]),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(
            resp2(&mut h, &["ZPOPMIN", "z", "x"]),
            err("ERR value is out of range, must be positive")
        );
        assert_eq!(resp2(&mut h, &["ZPOPMIN", "z", "1", "2"]), err(SYNTAX));
        h.set("s", "v");
        assert_eq!(resp2(&mut h, &["ZPOPMIN", "s", "0"]), err(WRONGTYPE));
    }

    #[test]
    fn zmpop() {
        let mut h = Harness::new();
        h.run(&["ZADD", "b", "1", "x", "2", "y", "3", "z"]);
        assert_eq!(
            resp2(&mut h, &["ZMPOP", "2", "a", "b", "MIN"]),
            "*2\r\n$1\r\nb\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n"
        );
        assert_eq!(
            resp3(&mut h, &["ZMPOP", "2", "a", "b", "MAX", "COUNT", "5"]),
            "*2\r\n$1\r\nb\r\n*2\r\n*2\r\n$1\r\nz\r\n,3\r\n*2\r\n$1\r\ny\r\n,2\r\n"
        );
        assert_eq!(resp2(&mut h, &["ZMPOP", "2", "a", "b", "MIN"]), "*-1\r\n");
        assert_eq!(resp3(&mut h, &["ZMPOP", "1", "a", "MIN"]), "_\r\n");
        for (words, expected) in [
            (
                &["ZMPOP", "0", "a", "MIN"][..],
                "ERR numkeys should be greater than 0",
            ),
            (
                &["ZMPOP", "x", "a", "MIN"],
                "ERR numkeys should be greater than 0",
            ),
            (&["ZMPOP", "2", "a", "MIN"], SYNTAX),
            (&["ZMPOP", "1", "a", "LEFT"], SYNTAX),
            (
                &["ZMPOP", "1", "a", "MIN", "COUNT", "0"],
                "ERR count should be greater than 0",
            ),
            (
                &["ZMPOP", "1", "a", "MIN", "COUNT", "1", "COUNT", "1"],
                SYNTAX,
            ),
            (&["ZMPOP", "1", "a", "MIN", "COUNT"], SYNTAX),
        ] {
            assert_eq!(resp2(&mut h, words), err(expected), "{words:?}");
        }
        h.set("s", "v");
        assert_eq!(
            resp2(&mut h, &["ZMPOP", "2", "missing", "s", "MIN"]),
            err(WRONGTYPE)
        );
    }

    fn blocked(h: &Harness) -> Option<(Vec<String>, u64)> {
        h.context.block.as_ref().map(|block| {
            let keys = block
                .keys
                .iter()
                .map(|key| String::from_utf8_lossy(key).into_owned())
                .collect();
            (keys, block.timeout_ms)
        })
    }

    #[test]
    fn blocking_pops_serve_or_record_the_block() {
        let mut h = Harness::new();
        h.run(&["ZADD", "b", "1", "x", "2", "y"]);
        assert_eq!(
            resp2(&mut h, &["BZPOPMIN", "a", "b", "0"]),
            "*3\r\n$1\r\nb\r\n$1\r\nx\r\n$1\r\n1\r\n"
        );
        assert_eq!(blocked(&h), None);
        assert_eq!(
            resp3(&mut h, &["BZPOPMAX", "b", "1"]),
            "*3\r\n$1\r\nb\r\n$1\r\ny\r\n,2\r\n"
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "b"]), int(0));
        assert_eq!(
            resp2(&mut h, &["BZPOPMIN", "a", "b", "a", "1.5"]),
            "*-1\r\n"
        );
        assert_eq!(blocked(&h), Some((vec!["a".into(), "b".into()], 1500)));
        assert_eq!(
            resp3(
                &mut h,
                &["BZMPOP", "0.001", "2", "q", "r", "MAX", "COUNT", "2"]
            ),
            "_\r\n"
        );
        assert_eq!(blocked(&h), Some((vec!["q".into(), "r".into()], 1)));
        h.run(&["ZADD", "r", "5", "m"]);
        assert_eq!(blocked(&h), None);
        assert_eq!(
            resp2(&mut h, &["BZMPOP", "0", "2", "q", "r", "MAX", "COUNT", "2"]),
            "*2\r\n$1\r\nr\r\n*1\r\n*2\r\n$1\r\nm\r\n$1\r\n5\r\n"
        );
        // Errors come before any block.
        h.set("s", "v");
        for (words, expected) in [
            (&["BZPOPMIN", "a", "s", "0"][..], WRONGTYPE),
            (
                &["BZPOPMIN", "a", "x"],
                "ERR timeout is not a float or out of range",
            ),
            (&["BZPOPMAX", "a", "-1"], "ERR timeout is negative"),
            (
                &["BZMPOP", "x", "1", "a", "MIN"],
                "ERR timeout is not a float or out of range",
            ),
            (
                &["BZMPOP", "x", "0", "a", "MIN"],
                "ERR numkeys should be greater than 0",
            ),
            (&["BZMPOP", "0", "1", "s", "MIN"], WRONGTYPE),
        ] {
            assert_eq!(resp2(&mut h, words), err(expected), "{words:?}");
            assert_eq!(blocked(&h), None, "{words:?}");
        }
    }

    #[test]
    fn additions_record_ready_keys() {
        let mut h = Harness::new();
        let ready = |h: &mut Harness| -> Vec<String> {
            h.keyspace
                .take_ready_keys()
                .into_iter()
                .map(|(_, key)| String::from_utf8_lossy(&key).into_owned())
                .collect()
        };
        h.run(&["ZADD", "a", "1", "x"]);
        h.run(&["ZADD", "a", "2", "x"]);
        h.run(&["ZINCRBY", "b", "1", "x"]);
        h.run(&["ZADD", "c", "XX", "1", "x"]);
        assert_eq!(ready(&mut h), ["a", "b"]);
        h.run(&["ZUNIONSTORE", "u", "2", "a", "b"]);
        h.run(&["ZRANGESTORE", "r", "a", "0", "-1"]);
        h.run(&["ZDIFFSTORE", "empty", "1", "missing"]);
        h.run(&["RENAME", "a", "renamed"]);
        h.run(&["COPY", "b", "copied"]);
        assert_eq!(ready(&mut h), ["u", "r", "renamed", "copied"]);
        h.run(&["ZREM", "renamed", "x"]);
        h.run(&["ZPOPMIN", "b"]);
        assert_eq!(ready(&mut h), Vec::<String>::new());
    }

    // ---- Set operations --------------------------------------------------------------------------

    fn set_operands(h: &mut Harness) {
        h.run(&["ZADD", "{t}a", "1", "x", "2", "y", "3", "z"]);
        h.run(&["ZADD", "{t}b", "10", "y", "20", "z", "30", "w"]);
    }

    #[test]
    fn union_inter_diff_replies() {
        let mut h = Harness::new();
        set_operands(&mut h);
        assert_eq!(
            resp2(&mut h, &["ZUNION", "2", "{t}a", "{t}b", "WITHSCORES"]),
            bulks(&["x", "1", "y", "12", "z", "23", "w", "30"])
        );
        assert_eq!(
            resp3(&mut h, &["ZINTER", "2", "{t}a", "{t}b", "WITHSCORES"]),
            "*2\r\n*2\r\n$1\r\ny\r\n,12\r\n*2\r\n$1\r\nz\r\n,23\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZINTER", "2", "{t}a", "{t}b"]),
            bulks(&["y", "z"])
        );
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZUNION",
                    "2",
                    "{t}a",
                    "{t}b",
                    "WEIGHTS",
                    "2",
                    "-1",
                    "AGGREGATE",
                    "MAX",
                    "WITHSCORES"
                ]
            ),
            bulks(&["w", "-30", "x", "2", "y", "4", "z", "6"])
        );
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZINTER",
                    "2",
                    "{t}a",
                    "{t}b",
                    "AGGREGATE",
                    "min",
                    "WITHSCORES"
                ]
            ),
            bulks(&["y", "2", "z", "3"])
        );
        assert_eq!(
            resp2(&mut h, &["ZDIFF", "2", "{t}a", "{t}b", "WITHSCORES"]),
            bulks(&["x", "1"])
        );
        assert_eq!(
            resp2(&mut h, &["ZDIFF", "2", "{t}b", "missing"]),
            bulks(&["y", "z", "w"])
        );
        assert_eq!(
            resp2(&mut h, &["ZINTER", "2", "{t}a", "missing"]),
            bulks(&[])
        );
        assert_eq!(resp2(&mut h, &["ZINTERCARD", "2", "{t}a", "{t}b"]), int(2));
        assert_eq!(
            resp2(&mut h, &["ZINTERCARD", "2", "{t}a", "{t}b", "LIMIT", "1"]),
            int(1)
        );
        assert_eq!(
            resp2(&mut h, &["ZINTERCARD", "2", "{t}a", "{t}b", "LIMIT", "0"]),
            int(2)
        );
        // inf - inf sums to 0; 0 * inf weights to 0.
        h.run(&["ZADD", "{t}p", "inf", "m"]);
        h.run(&["ZADD", "{t}n", "-inf", "m"]);
        assert_eq!(
            resp2(&mut h, &["ZUNION", "2", "{t}p", "{t}n", "WITHSCORES"]),
            bulks(&["m", "0"])
        );
        assert_eq!(
            resp2(
                &mut h,
                &["ZUNION", "1", "{t}p", "WEIGHTS", "0", "WITHSCORES"]
            ),
            bulks(&["m", "0"])
        );
    }

    #[test]
    fn set_operation_errors_in_redis_order() {
        let mut h = Harness::new();
        set_operands(&mut h);
        h.set("s", "v");
        for (words, expected) in [
            (
                &["ZUNION", "0", "{t}a"][..],
                "ERR at least 1 input key is needed for 'zunion' command",
            ),
            (
                &["ZINTERSTORE", "d", "0", "{t}a"],
                "ERR at least 1 input key is needed for 'zinterstore' command",
            ),
            (
                &["ZUNION", "-1", "{t}a"],
                "ERR at least 1 input key is needed for 'zunion' command",
            ),
            (&["ZUNION", "x", "{t}a"], NOT_INTEGER),
            (&["ZUNION", "3", "{t}a", "{t}b"], SYNTAX),
            // Keys are type-checked before the options are read.
            (&["ZUNION", "2", "{t}a", "s", "BOGUS"], WRONGTYPE),
            (&["ZUNION", "2", "{t}a", "{t}b", "BOGUS"], SYNTAX),
            (&["ZUNION", "2", "{t}a", "{t}b", "WEIGHTS", "1"], SYNTAX),
            (
                &["ZUNION", "2", "{t}a", "{t}b", "WEIGHTS", "1", "x"],
                "ERR weight value is not a float",
            ),
            (&["ZUNION", "2", "{t}a", "{t}b", "AGGREGATE", "AVG"], SYNTAX),
            (&["ZDIFF", "2", "{t}a", "{t}b", "WEIGHTS", "1", "2"], SYNTAX),
            (&["ZDIFF", "2", "{t}a", "{t}b", "AGGREGATE", "SUM"], SYNTAX),
            (
                &["ZUNIONSTORE", "d", "2", "{t}a", "{t}b", "WITHSCORES"],
                SYNTAX,
            ),
            (&["ZINTERCARD", "2", "{t}a", "{t}b", "WITHSCORES"], SYNTAX),
            (
                &["ZINTERCARD", "2", "{t}a", "{t}b", "WEIGHTS", "1", "1"],
                SYNTAX,
            ),
            (
                &["ZINTERCARD", "2", "{t}a", "{t}b", "LIMIT", "-1"],
                "ERR LIMIT can't be negative",
            ),
            (
                &["ZINTERCARD", "2", "{t}a", "{t}b", "LIMIT", "x"],
                "ERR LIMIT can't be negative",
            ),
            (
                &["ZINTERCARD", "0", "{t}a"],
                "ERR at least 1 input key is needed for 'zintercard' command",
            ),
        ] {
            assert_eq!(resp2(&mut h, words), err(expected), "{words:?}");
        }
    }

    #[test]
    fn plain_sets_are_inputs_with_score_one() {
        let mut h = Harness::new();
        h.run(&["SADD", "{t}s", "a", "b", "c"]);
        h.run(&["ZADD", "{t}z", "5", "b", "7", "d"]);
        assert_eq!(
            resp2(&mut h, &["ZUNION", "2", "{t}s", "{t}z", "WITHSCORES"]),
            "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n6\r\n$1\r\nd\r\n$1\r\n7\r\n"
        );
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZINTER",
                    "2",
                    "{t}s",
                    "{t}z",
                    "WEIGHTS",
                    "10",
                    "1",
                    "WITHSCORES"
                ]
            ),
            "*2\r\n$1\r\nb\r\n$2\r\n15\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZDIFFSTORE", "{t}d", "2", "{t}s", "{t}z"]),
            int(2)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "{t}d", "0", "-1", "WITHSCORES"]),
            "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n1\r\n"
        );
        assert_eq!(resp2(&mut h, &["ZINTERCARD", "2", "{t}s", "{t}z"]), int(1));
        // A list is still the wrong type.
        h.run(&["RPUSH", "{t}l", "a"]);
        assert_eq!(
            resp2(&mut h, &["ZUNION", "2", "{t}s", "{t}l"]),
            err(WRONGTYPE)
        );
    }

    #[test]
    fn store_forms_overwrite_the_destination() {
        let mut h = Harness::new();
        set_operands(&mut h);
        h.set("{t}d", "old");
        h.run(&["EXPIRE", "{t}d", "100"]);
        assert_eq!(
            resp2(&mut h, &["ZUNIONSTORE", "{t}d", "2", "{t}a", "{t}b"]),
            int(4)
        );
        assert_eq!(resp2(&mut h, &["TTL", "{t}d"]), int(-1));
        assert_eq!(resp2(&mut h, &["TYPE", "{t}d"]), "+zset\r\n");
        assert_eq!(
            resp2(
                &mut h,
                &[
                    "ZINTERSTORE",
                    "{t}d",
                    "2",
                    "{t}a",
                    "{t}b",
                    "WEIGHTS",
                    "1",
                    "0.5"
                ]
            ),
            int(2)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "{t}d", "0", "-1", "WITHSCORES"]),
            bulks(&["y", "7", "z", "13"])
        );
        assert_eq!(
            resp2(&mut h, &["ZDIFFSTORE", "{t}d", "2", "{t}a", "{t}b"]),
            int(1)
        );
        assert_eq!(
            resp2(&mut h, &["ZDIFFSTORE", "{t}d", "2", "{t}a", "{t}a"]),
            int(0)
        );
        assert_eq!(resp2(&mut h, &["EXISTS", "{t}d"]), int(0));
        // The destination may be an input.
        assert_eq!(
            resp2(&mut h, &["ZUNIONSTORE", "{t}a", "2", "{t}a", "{t}b"]),
            int(4)
        );
        assert_eq!(resp2(&mut h, &["ZSCORE", "{t}a", "z"]), "$2\r\n23\r\n");
    }

    // ---- ZRANDMEMBER, ZSCAN ------------------------------------------------------------------------

    #[test]
    fn zrandmember_counts_and_shapes() {
        let mut h = Harness::new();
        sample(&mut h);
        let members = ["low", "a", "b", "c", "cc"];
        let Frame::Bulk(one) = h.run(&["ZRANDMEMBER", "z"]) else {
            panic!("a bulk reply");
        };
        assert!(members.contains(&std::str::from_utf8(&one).unwrap()));
        assert_eq!(resp2(&mut h, &["ZRANDMEMBER", "missing"]), "$-1\r\n");
        assert_eq!(resp2(&mut h, &["ZRANDMEMBER", "missing", "3"]), "*0\r\n");
        assert_eq!(resp2(&mut h, &["ZRANDMEMBER", "z", "0"]), "*0\r\n");
        // At least the size: the whole set, from the highest score down.
        assert_eq!(
            resp2(&mut h, &["ZRANDMEMBER", "z", "5"]),
            bulks(&["cc", "c", "b", "a", "low"])
        );
        assert_eq!(
            resp3(&mut h, &["ZRANDMEMBER", "z", "9", "WITHSCORES"])
                .matches("*2\r\n")
                .count(),
            5
        );
        let Frame::Array(distinct) = h.run(&["ZRANDMEMBER", "z", "3"]) else {
            panic!("an array");
        };
        let unique: BTreeSet<_> = distinct.iter().filter_map(Frame::as_bytes).collect();
        assert_eq!((distinct.len(), unique.len()), (3, 3));
        let Frame::Array(repeated) = h.run(&["ZRANDMEMBER", "z", "-20", "WITHSCORES"]) else {
            panic!("an array");
        };
        assert_eq!(repeated.len(), 40);
        assert_eq!(
            resp2(&mut h, &["ZRANDMEMBER", "z", "1", "WITHSCORES", "x"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZRANDMEMBER", "z", "1", "SCORES"]),
            err(SYNTAX)
        );
        assert_eq!(resp2(&mut h, &["ZRANDMEMBER", "z", "x"]), err(NOT_INTEGER));
        assert_eq!(
            resp2(&mut h, &["ZRANDMEMBER", "z", "-9223372036854775808"]),
            err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(
            resp2(
                &mut h,
                &["ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"]
            ),
            err("ERR value is out of range")
        );
        // The same seed gives the same picks.
        let picks = |seed: u64| {
            let mut h = Harness::new();
            h.context.rng = crate::Rng::new(seed);
            sample(&mut h);
            (
                h.run(&["ZRANDMEMBER", "z", "-8"]),
                h.run(&["ZRANDMEMBER", "z", "2"]),
            )
        };
        assert_eq!(picks(3), picks(3));
    }

    #[test]
    fn zscan_listpack_and_skiplist() {
        let mut h = Harness::new();
        sample(&mut h);
        assert_eq!(
            resp2(&mut h, &["ZSCAN", "z", "0", "MATCH", "c*"]),
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\nc\r\n$1\r\n3\r\n$2\r\ncc\r\n$1\r\n3\r\n"
        );
        // Scores stay strings in RESP3, as Redis sends them.
        assert_eq!(
            resp3(&mut h, &["ZSCAN", "z", "0", "MATCH", "low"]),
            "*2\r\n$1\r\n0\r\n*2\r\n$3\r\nlow\r\n$4\r\n-inf\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZSCAN", "missing", "0"]),
            "*2\r\n$1\r\n0\r\n*0\r\n"
        );
        assert_eq!(
            resp2(&mut h, &["ZSCAN", "z", "x"]),
            err("ERR invalid cursor")
        );
        assert_eq!(
            resp2(&mut h, &["ZSCAN", "z", "0", "COUNT", "0"]),
            err(SYNTAX)
        );
        assert_eq!(
            resp2(&mut h, &["ZSCAN", "z", "0", "TYPE", "zset"]),
            err(SYNTAX)
        );
        for index in 0..300 {
            h.run(&["ZADD", "big", &index.to_string(), &format!("m{index}")]);
        }
        let mut seen = BTreeSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let Frame::Array(reply) = h.run(&["ZSCAN", "big", &cursor, "COUNT", "20"]) else {
                panic!("an array");
            };
            let (Frame::Bulk(next), Frame::Array(items)) = (&reply[0], &reply[1]) else {
                panic!("cursor and items");
            };
            for pair in items.chunks(2) {
                seen.insert(pair[0].as_bytes().map(<[u8]>::to_vec));
            }
            calls += 1;
            cursor = String::from_utf8_lossy(next).into_owned();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 300);
        assert!(calls >= 10, "{calls}");
        // Inside a script the whole set comes in one step, in score order,
        // whatever the cursor: a copy of the set with another index layout
        // (a replica that loaded a snapshot) answers the same.
        h.context.in_script = true;
        for cursor in ["0", "12345"] {
            let Frame::Array(reply) = h.run(&["ZSCAN", "big", cursor, "COUNT", "5"]) else {
                panic!("an array");
            };
            assert_eq!(reply[0], Frame::bulk("0"));
            let Frame::Array(items) = &reply[1] else {
                panic!("items");
            };
            let members: Vec<Frame> = items.iter().step_by(2).cloned().collect();
            let expected: Vec<Frame> = (0..300)
                .map(|index| Frame::bulk(format!("m{index}")))
                .collect();
            assert_eq!(members, expected);
        }
        h.context.in_script = false;
    }

    // ---- Types, encodings, dump ----------------------------------------------------------------

    #[test]
    fn wrongtype_everywhere() {
        let mut h = Harness::new();
        h.set("s", "v");
        for words in [
            &["ZADD", "s", "1", "a"][..],
            &["ZINCRBY", "s", "1", "a"],
            &["ZREM", "s", "a"],
            &["ZCARD", "s"],
            &["ZSCORE", "s", "a"],
            &["ZMSCORE", "s", "a"],
            &["ZRANK", "s", "a"],
            &["ZREVRANK", "s", "a"],
            &["ZRANGE", "s", "0", "-1"],
            &["ZRANGESTORE", "d", "s", "0", "-1"],
            &["ZRANGEBYSCORE", "s", "0", "1"],
            &["ZREVRANGEBYSCORE", "s", "1", "0"],
            &["ZRANGEBYLEX", "s", "-", "+"],
            &["ZREVRANGEBYLEX", "s", "+", "-"],
            &["ZREVRANGE", "s", "0", "-1"],
            &["ZCOUNT", "s", "0", "1"],
            &["ZLEXCOUNT", "s", "-", "+"],
            &["ZREMRANGEBYSCORE", "s", "0", "1"],
            &["ZREMRANGEBYRANK", "s", "0", "1"],
            &["ZREMRANGEBYLEX", "s", "-", "+"],
            &["ZPOPMIN", "s"],
            &["ZPOPMAX", "s", "2"],
            &["BZPOPMIN", "s", "0"],
            &["BZPOPMAX", "s", "0"],
            &["ZMPOP", "1", "s", "MIN"],
            &["BZMPOP", "0", "1", "s", "MAX"],
            &["ZUNION", "1", "s"],
            &["ZINTER", "1", "s"],
            &["ZDIFF", "1", "s"],
            &["ZUNIONSTORE", "d", "1", "s"],
            &["ZINTERSTORE", "d", "1", "s"],
            &["ZDIFFSTORE", "d", "1", "s"],
            &["ZINTERCARD", "1", "s"],
            &["ZRANDMEMBER", "s"],
            &["ZRANDMEMBER", "s", "2"],
            &["ZSCAN", "s", "0"],
        ] {
            assert_eq!(resp2(&mut h, words), err(WRONGTYPE), "{words:?}");
            assert_eq!(h.context.block, None, "{words:?}");
        }
        assert_eq!(resp2(&mut h, &["EXISTS", "d"]), int(0));
        h.run(&["ZADD", "z", "1", "a"]);
        for words in [&["GET", "z"][..], &["LPUSH", "z", "a"], &["INCR", "z"]] {
            assert_eq!(resp2(&mut h, words), err(WRONGTYPE), "{words:?}");
        }
    }

    #[test]
    fn encodings_convert_as_in_redis() {
        let mut h = Harness::new();
        let encoding = |h: &mut Harness, key: &str| resp2(h, &["OBJECT", "ENCODING", key]);
        let listpack = "$8\r\nlistpack\r\n";
        let skiplist = "$8\r\nskiplist\r\n";
        let mut words = vec!["ZADD".to_string(), "z".to_string()];
        for index in 0..128 {
            words.push(index.to_string());
            words.push(format!("m{index}"));
        }
        let words_ref: Vec<&str> = words.iter().map(String::as_str).collect();
        h.run(&words_ref);
        assert_eq!(encoding(&mut h, "z"), listpack);
        h.run(&["ZADD", "z", "1", "m1"]);
        assert_eq!(encoding(&mut h, "z"), listpack);
        h.run(&["ZADD", "z", "1", "one-more"]);
        assert_eq!(encoding(&mut h, "z"), skiplist);
        h.run(&["ZREMRANGEBYRANK", "z", "1", "-1"]);
        assert_eq!(encoding(&mut h, "z"), skiplist);
        // A long member converts; so does a first ZADD of many pairs.
        h.run(&["ZADD", "long", "1", &"x".repeat(65)]);
        assert_eq!(encoding(&mut h, "long"), skiplist);
        h.run(&["ZADD", "edge", "1", &"x".repeat(64)]);
        assert_eq!(encoding(&mut h, "edge"), listpack);
        // More than 128 pairs in one ZADD convert an existing listpack even when
        // they are all updates (zsetTypeMaybeConvert).
        h.run(&["ZADD", "small", "1", "a"]);
        let mut updates = vec!["ZADD", "small"];
        for _ in 0..129 {
            updates.extend(["2", "a"]);
        }
        h.run(&updates);
        assert_eq!(encoding(&mut h, "small"), skiplist);
        // Stored results take the natural encoding.
        h.run(&["ZUNIONSTORE", "u", "1", "z"]);
        assert_eq!(encoding(&mut h, "u"), listpack);
        h.run(&["ZRANGESTORE", "r", "long", "0", "-1"]);
        assert_eq!(encoding(&mut h, "r"), skiplist);
    }

    #[test]
    fn skiplist_sets_answer_like_listpack_ones() {
        // The same commands against a small set and its forced skiplist twin.
        let mut h = Harness::new();
        let members: Vec<String> = (0..40).map(|i| format!("m{:02}", (i * 7) % 40)).collect();
        for (index, member) in members.iter().enumerate() {
            let score = ((index % 5) as f64 - 2.0).to_string();
            h.run(&["ZADD", "small", &score, member]);
            h.run(&["ZADD", "big", &score, member]);
        }
        h.run(&["ZADD", "big", "0", &"y".repeat(70)]);
        h.run(&["ZREM", "big", &"y".repeat(70)]);
        assert_eq!(h.encoding("big"), Some("skiplist"));
        assert_eq!(h.encoding("small"), Some("listpack"));
        for words in [
            &["ZRANGE", "K", "0", "-1", "WITHSCORES"][..],
            &["ZRANGE", "K", "3", "17", "REV"],
            &["ZRANGEBYSCORE", "K", "(-1", "1", "LIMIT", "3", "4"],
            &["ZREVRANGEBYSCORE", "K", "1", "-inf", "LIMIT", "2", "9"],
            &["ZRANGEBYLEX", "K", "[m10", "(m30"],
            &["ZREVRANGEBYLEX", "K", "(m30", "-", "LIMIT", "1", "3"],
            &["ZCOUNT", "K", "0", "(2"],
            &["ZLEXCOUNT", "K", "-", "[m20"],
            &["ZRANK", "K", "m13", "WITHSCORE"],
            &["ZREVRANK", "K", "m13"],
            &["ZMSCORE", "K", "m05", "none"],
            &["ZREMRANGEBYSCORE", "K", "1", "1"],
            &["ZPOPMAX", "K", "3"],
            &["ZREMRANGEBYRANK", "K", "2", "4"],
            &["ZRANGE", "K", "0", "-1", "WITHSCORES"],
        ] {
            let run = |h: &mut Harness, key: &str| {
                let words: Vec<&str> = words
                    .iter()
                    .map(|w| if *w == "K" { key } else { w })
                    .collect();
                h.run(&words)
            };
            let small = run(&mut h, "small");
            assert_eq!(small, run(&mut h, "big"), "{words:?}");
        }
    }

    #[test]
    fn dump_restore_and_debug_object() {
        let mut h = Harness::new();
        sample(&mut h);
        let Frame::Bulk(payload) = h.run(&["DUMP", "z"]) else {
            panic!("a payload");
        };
        let payload = String::from_utf8_lossy(&payload).into_owned();
        let arguments = [
            Bytes::from_static(b"RESTORE"),
            Bytes::from_static(b"copy"),
            Bytes::from_static(b"0"),
            match h.run(&["DUMP", "z"]) {
                Frame::Bulk(bytes) => bytes,
                _ => panic!("a payload"),
            },
        ];
        assert!(!payload.is_empty());
        assert_eq!(h.run_arguments(&arguments), Frame::OK);
        assert_eq!(
            resp2(&mut h, &["ZRANGE", "copy", "0", "-1", "WITHSCORES"]),
            resp2(&mut h, &["ZRANGE", "z", "0", "-1", "WITHSCORES"])
        );
        assert_eq!(
            crate::digest::value_digest(h.entry("copy")),
            crate::digest::value_digest(h.entry("z"))
        );
        h.run(&["ZADD", "copy", "9", "a"]);
        assert_ne!(
            crate::digest::value_digest(h.entry("copy")),
            crate::digest::value_digest(h.entry("z"))
        );
        let line = crate::digest::debug_object(&h.keyspace, h.entry("z").unwrap(), &h.context);
        assert!(
            line.contains(" encoding:listpack serializedlength:"),
            "{line}"
        );
    }
}
