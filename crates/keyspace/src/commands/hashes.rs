//! Hash commands: the Redis 7.2 hash family.
//!
//! Argument checks, lookups and type checks happen in the order Redis does them,
//! so the same bad request gets the same error. A hash whose last field goes is
//! deleted; a write that fails never leaves an empty hash behind. Encodings
//! convert as Redis's do (see `hash.rs`).
//!
//! Random choices (HRANDFIELD) come only from the context's generator, and
//! iteration follows storage order, so every replica answers alike.

use super::strings::long_double::LongDouble;
use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::hash::{HashValue, Pair};
use crate::rng::Rng;
use crate::value::{canonical_i64, Value};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::{Frame, Protocol};
use std::collections::BTreeSet;

const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];
const NONDETERMINISTIC_ORDER: &[&str] = &["nondeterministic_output_order"];
pub(super) const SCAN_COMPLEXITY: &str = "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.";
const WHOLE_HASH: &str = "O(N) where N is the size of the hash.";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "hdel",
        arity: -3,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | DELETE)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of fields to be removed.",
        handler: Handler::Keyspace(hdel),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hexists",
        arity: 3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "hash", "fast"],
        group: "hash",
        summary: "Determines whether a field exists in a hash.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hexists),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hget",
        arity: 3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "fast"],
        group: "hash",
        summary: "Returns the value of a field in a hash.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hget),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hgetall",
        arity: 2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "hash",
        summary: "Returns all fields and values in a hash.",
        since: "2.0.0",
        complexity: WHOLE_HASH,
        handler: Handler::Keyspace(hgetall),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrby",
        arity: 4,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hincrby),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hincrbyfloat",
        arity: 4,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.",
        since: "2.6.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hincrbyfloat),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hkeys",
        arity: 2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "hash", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "hash",
        summary: "Returns all fields in a hash.",
        since: "2.0.0",
        complexity: WHOLE_HASH,
        handler: Handler::Keyspace(hkeys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hlen",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "hash", "fast"],
        group: "hash",
        summary: "Returns the number of fields in a hash.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hlen),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmget",
        arity: -3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "fast"],
        group: "hash",
        summary: "Returns the values of all fields in a hash.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of fields being requested.",
        handler: Handler::Keyspace(hmget),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hmset",
        arity: -4,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | UPDATE)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Sets the values of multiple fields.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of fields being set.",
        handler: Handler::Keyspace(hmset),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hrandfield",
        arity: -2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "slow"],
        tips: NONDETERMINISTIC,
        group: "hash",
        summary: "Returns one or more random fields from a hash.",
        since: "6.2.0",
        complexity: "O(N) where N is the number of fields returned",
        handler: Handler::Keyspace(hrandfield),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hscan",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "slow"],
        tips: NONDETERMINISTIC,
        group: "hash",
        summary: "Iterates over fields and values of a hash.",
        since: "2.8.0",
        complexity: SCAN_COMPLEXITY,
        handler: Handler::Keyspace(hscan),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hset",
        arity: -4,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | UPDATE)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Creates or modifies the value of a field in a hash.",
        since: "2.0.0",
        complexity: "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        handler: Handler::Keyspace(hset),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hsetnx",
        arity: 4,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "hash", "fast"],
        group: "hash",
        summary: "Sets the value of a field in a hash only when the field doesn't exist.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hsetnx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hstrlen",
        arity: 3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "hash", "fast"],
        group: "hash",
        summary: "Returns the length of the value of a field.",
        since: "3.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(hstrlen),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "hvals",
        arity: 2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "hash", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "hash",
        summary: "Returns all values in a hash.",
        since: "2.0.0",
        complexity: WHOLE_HASH,
        handler: Handler::Keyspace(hvals),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const HASH_VALUE_NOT_INTEGER: &str = "ERR hash value is not an integer";
const HASH_VALUE_NOT_FLOAT: &str = "ERR hash value is not a float";
const INCREMENT_NAN_OR_INFINITY: &str = "ERR value is NaN or Infinity";
pub(super) const COUNT_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
const WITHVALUES_OUT_OF_RANGE: &str = "ERR value is out of range";

// ---- Shared helpers ---------------------------------------------------------------

fn hash_mut(value: &mut Value) -> Result<&mut HashValue, Frame> {
    match value {
        Value::Hash(hash) => Ok(hash),
        _ => Err(Frame::error(errors::WRONGTYPE)),
    }
}

/// The hash at `key` for a read command (`lookupKeyRead`: counts a hit or
/// miss); `Ok(None)` when absent, WRONGTYPE for other types.
fn read_hash<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut HashValue>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => hash_mut(&mut entry.value).map(Some),
    }
}

/// The hash at `key` for a write command (`lookupKeyWrite`).
fn write_hash<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut HashValue>, Frame> {
    match keyspace.lookup_write(context, key) {
        None => Ok(None),
        Some(entry) => hash_mut(&mut entry.value).map(Some),
    }
}

/// Stores a new hash at `key` (absent: the caller looked it up for writing).
fn create_hash(keyspace: &mut Keyspace, context: &Context, key: &[u8], hash: HashValue) {
    debug_assert!(!hash.is_empty());
    let access = keyspace.initial_access(context);
    keyspace
        .db(context.db)
        .set(key, Value::Hash(hash), None, access);
}

/// Runs `change` on the hash at `key` for writing, or on a new empty hash that
/// is stored only when `change` succeeds and leaves it non-empty (Redis's
/// `hashTypeLookupWriteOrCreate`, without ever keeping an empty hash).
fn with_hash_for_write<T>(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    change: impl FnOnce(&mut HashValue) -> Result<T, Frame>,
) -> Result<T, Frame> {
    if let Some(hash) = write_hash(keyspace, context, key)? {
        return change(hash);
    }
    let mut hash = HashValue::new();
    let outcome = change(&mut hash)?;
    if !hash.is_empty() {
        create_hash(keyspace, context, key, hash);
    }
    Ok(outcome)
}

fn bulk(data: &[u8]) -> Frame {
    Frame::bulk_from_slice(data)
}

/// HSCAN / SSCAN options after the cursor, parsed as Redis 7.2's
/// `scanGenericCommand` does for a key's collection (no TYPE, no NOVALUES).
pub(super) struct ScanOptions<'a> {
    pub count: usize,
    /// None when absent or `*` (everything matches).
    pub pattern: Option<&'a [u8]>,
}

pub(super) fn parse_scan_options(options: &[Bytes]) -> Result<ScanOptions<'_>, Frame> {
    let mut count = 10usize;
    let mut pattern = None;
    let mut index = 0;
    while index < options.len() {
        let option = &options[index];
        let has_value = options.len() - index >= 2;
        if args::is_keyword(option, "COUNT") && has_value {
            let value = args::parse_i64(&options[index + 1])?;
            if value < 1 {
                return Err(Frame::error(errors::SYNTAX));
            }
            count = usize::try_from(value).unwrap_or(usize::MAX);
        } else if args::is_keyword(option, "MATCH") && has_value {
            let text = options[index + 1].as_ref();
            pattern = (text != b"*").then_some(text);
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
        index += 2;
    }
    Ok(ScanOptions { count, pattern })
}

/// The `[cursor, items]` reply of a collection scan.
pub(super) fn scan_reply(cursor: u64, items: Vec<Frame>) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(cursor.to_string())),
        Frame::Array(items),
    ])
}

/// `count` distinct positions out of `len` (`count < len`), uniformly, in
/// ascending order. Selection sampling when many are wanted, Floyd's
/// algorithm otherwise; either way only `rng` decides.
pub(super) fn sample_positions(rng: &mut Rng, len: usize, count: usize) -> Vec<usize> {
    debug_assert!(count < len);
    if count.saturating_mul(3) > len {
        let mut chosen = Vec::with_capacity(count);
        for position in 0..len {
            let needed = count - chosen.len();
            if needed == 0 {
                break;
            }
            if (rng.below((len - position) as u64) as usize) < needed {
                chosen.push(position);
            }
        }
        return chosen;
    }
    let mut chosen = BTreeSet::new();
    for upper in len - count..len {
        let pick = rng.below(upper as u64 + 1) as usize;
        if !chosen.insert(pick) {
            chosen.insert(upper);
        }
    }
    chosen.into_iter().collect()
}

/// A count argument within `-i64::MAX..=i64::MAX`, as Redis's
/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)`.
pub(super) fn parse_random_count(argument: &[u8]) -> Result<i64, Frame> {
    let count = args::parse_i64(argument)?;
    if count == i64::MIN {
        return Err(Frame::error(COUNT_OUT_OF_RANGE));
    }
    Ok(count)
}

// ---- Writes -------------------------------------------------------------------------

fn hset_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    name: &str,
) -> Result<usize, Frame> {
    if arguments.len() % 2 == 1 {
        return Err(Frame::error_owned(errors::wrong_arity(name)));
    }
    let key = &arguments[1];
    let pairs = &arguments[2..];
    let created = with_hash_for_write(keyspace, context, key, |hash| {
        hash.prepare_for(pairs.iter().map(|argument| argument.as_ref()));
        Ok(pairs
            .chunks_exact(2)
            .filter(|pair| hash.set(&pair[0], &pair[1]))
            .count())
    })?;
    keyspace.stats.dirty += (pairs.len() / 2) as u64;
    Ok(created)
}

fn hset(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match hset_generic(keyspace, context, arguments, "hset") {
        Ok(created) => Frame::Integer(created as i64),
        Err(error) => error,
    }
}

fn hmset(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match hset_generic(keyspace, context, arguments, "hmset") {
        Ok(_) => Frame::OK,
        Err(error) => error,
    }
}

fn hsetnx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let (key, field, value) = (&arguments[1], &arguments[2], &arguments[3]);
    let outcome = with_hash_for_write(keyspace, context, key, |hash| {
        if hash.contains(field) {
            return Ok(false);
        }
        hash.prepare_for([field.as_ref(), value.as_ref()].into_iter());
        hash.set(field, value);
        Ok(true)
    });
    match outcome {
        Ok(true) => {
            keyspace.stats.dirty += 1;
            Frame::Integer(1)
        }
        Ok(false) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hdel(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let (deleted, emptied) = match write_hash(keyspace, context, key) {
        Err(error) => return error,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(hash)) => {
            let mut deleted = 0;
            for field in &arguments[2..] {
                if hash.remove(field) {
                    deleted += 1;
                    if hash.is_empty() {
                        break;
                    }
                }
            }
            (deleted, hash.is_empty())
        }
    };
    if emptied {
        keyspace.db(context.db).remove(key);
    }
    keyspace.stats.dirty += deleted;
    Frame::Integer(deleted as i64)
}

fn hincrby(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let increment = match args::parse_i64(&arguments[3]) {
        Ok(increment) => increment,
        Err(error) => return error,
    };
    let field = &arguments[2];
    let outcome = with_hash_for_write(keyspace, context, &arguments[1], |hash| {
        let current = match hash.get(field) {
            Some(value) => {
                canonical_i64(value).ok_or_else(|| Frame::error(HASH_VALUE_NOT_INTEGER))?
            }
            None => 0,
        };
        let sum = current
            .checked_add(increment)
            .ok_or_else(|| Frame::error(errors::OVERFLOW))?;
        hash.set(field, sum.to_string().as_bytes());
        Ok(sum)
    });
    match outcome {
        Ok(sum) => {
            keyspace.stats.dirty += 1;
            Frame::Integer(sum)
        }
        Err(error) => error,
    }
}

fn hincrbyfloat(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(increment) = LongDouble::parse(&arguments[3]) else {
        return Frame::error(errors::NOT_FLOAT);
    };
    if matches!(increment, LongDouble::Infinite { .. }) {
        return Frame::error(INCREMENT_NAN_OR_INFINITY);
    }
    let field = &arguments[2];
    let outcome = with_hash_for_write(keyspace, context, &arguments[1], |hash| {
        let current = match hash.get(field) {
            Some(value) => {
                LongDouble::parse(value).ok_or_else(|| Frame::error(HASH_VALUE_NOT_FLOAT))?
            }
            None => LongDouble::zero(),
        };
        let text = current
            .add(increment)
            .map(LongDouble::to_human_string)
            .ok_or_else(|| Frame::error(errors::NAN_OR_INFINITY))?;
        hash.set(field, text.as_bytes());
        Ok(text)
    });
    match outcome {
        Ok(text) => {
            keyspace.stats.dirty += 1;
            Frame::Bulk(Bytes::from(text))
        }
        Err(error) => error,
    }
}

// ---- Reads --------------------------------------------------------------------------

fn hget(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => hash.get(&arguments[2]).map_or(Frame::Null, bulk),
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn hmget(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let fields = &arguments[2..];
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Array(
            fields
                .iter()
                .map(|field| hash.get(field).map_or(Frame::Null, bulk))
                .collect(),
        ),
        Ok(None) => Frame::Array(vec![Frame::Null; fields.len()]),
        Err(error) => error,
    }
}

fn hexists(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.contains(&arguments[2]) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hlen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hstrlen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.get(&arguments[2]).map_or(0, <[u8]>::len) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hgetall(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Map(
            hash.pairs()
                .iter()
                .map(|pair| (bulk(pair.field()), bulk(pair.value())))
                .collect(),
        ),
        Ok(None) => Frame::Map(Vec::new()),
        Err(error) => error,
    }
}

fn hkeys_or_hvals(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    pick: fn(&Pair) -> &[u8],
) -> Frame {
    match read_hash(keyspace, context, key) {
        Ok(Some(hash)) => Frame::Array(hash.pairs().iter().map(|pair| bulk(pick(pair))).collect()),
        Ok(None) => Frame::Array(Vec::new()),
        Err(error) => error,
    }
}

fn hkeys(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    hkeys_or_hvals(keyspace, context, &arguments[1], Pair::field)
}

fn hvals(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    hkeys_or_hvals(keyspace, context, &arguments[1], Pair::value)
}

fn hscan(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = super::keys::parse_cursor(&arguments[2]) else {
        return Frame::error(errors::CURSOR_INVALID);
    };
    let hash = match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => hash,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(error) => return error,
    };
    // As Redis: options are read after the key was found and type checked.
    let options = match parse_scan_options(&arguments[3..]) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let mut items = Vec::new();
    let next = hash.scan(cursor, options.count, |pair| {
        if options
            .pattern
            .is_none_or(|pattern| glob_match(pattern, pair.field(), false))
        {
            items.push(bulk(pair.field()));
            items.push(bulk(pair.value()));
        }
    });
    scan_reply(next, items)
}

/// One HRANDFIELD answer: the field, or in RESP3 with values a `[field,
/// value]` pair, in RESP2 with values the field then the value (flattened).
fn push_random_field(items: &mut Vec<Frame>, pair: &Pair, with_values: bool, protocol: Protocol) {
    if !with_values {
        items.push(bulk(pair.field()));
    } else if protocol == Protocol::Resp2 {
        items.push(bulk(pair.field()));
        items.push(bulk(pair.value()));
    } else {
        items.push(Frame::Array(vec![bulk(pair.field()), bulk(pair.value())]));
    }
}

fn hrandfield(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(count_argument) = arguments.get(2) else {
        return match read_hash(keyspace, context, &arguments[1]) {
            Ok(Some(hash)) => {
                let position = context.rng.below(hash.len() as u64) as usize;
                bulk(hash.pairs()[position].field())
            }
            Ok(None) => Frame::Null,
            Err(error) => error,
        };
    };
    let count = match parse_random_count(count_argument) {
        Ok(count) => count,
        Err(error) => return error,
    };
    let with_values = match arguments.get(3) {
        None => false,
        Some(option) if arguments.len() == 4 && args::is_keyword(option, "WITHVALUES") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
                return Frame::error(WITHVALUES_OUT_OF_RANGE);
            }
            true
        }
        Some(_) => return Frame::error(errors::SYNTAX),
    };
    match read_hash(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => random_fields(hash, count, with_values, context),
        Ok(None) => Frame::Array(Vec::new()),
        Err(error) => error,
    }
}

/// HRANDFIELD with a count: negative for `|count|` independent picks (repeats
/// allowed), positive for distinct fields (the whole hash when it has no more).
fn random_fields(hash: &HashValue, count: i64, with_values: bool, context: &mut Context) -> Frame {
    let protocol = context.protocol;
    let rng = &mut context.rng;
    let pairs = hash.pairs();
    let mut items = Vec::new();
    if count < 0 {
        let picks = count.unsigned_abs();
        // A reply this large would not fit any client buffer; Redis would send
        // it piecewise, we refuse to build it past the value's own bound.
        for _ in 0..picks.min(MAX_RANDOM_PICKS) {
            let position = rng.below(pairs.len() as u64) as usize;
            push_random_field(&mut items, &pairs[position], with_values, protocol);
        }
        return Frame::Array(items);
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= pairs.len() {
        for pair in pairs {
            push_random_field(&mut items, pair, with_values, protocol);
        }
    } else {
        for position in sample_positions(rng, pairs.len(), count) {
            push_random_field(&mut items, &pairs[position], with_values, protocol);
        }
    }
    Frame::Array(items)
}

/// Most picks a negative-count HRANDFIELD / SRANDMEMBER answers with: a limit
/// on the reply this keyspace builds in memory (Redis streams such replies).
pub(super) const MAX_RANDOM_PICKS: u64 = 1 << 24;
