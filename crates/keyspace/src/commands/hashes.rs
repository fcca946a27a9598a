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
use super::typed;
use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::hash::{HashValue, Pair};
use crate::rng::Rng;
use crate::value::canonical_i64;
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

/// Runs `change` on the hash at `key` for writing, or on a new empty hash that
/// is stored only when `change` succeeds and leaves it non-empty (Redis's
/// `hashTypeLookupWriteOrCreate`, without ever keeping an empty hash).
fn with_hash_for_write<T>(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    change: impl FnOnce(&mut HashValue) -> Result<T, Frame>,
) -> Result<T, Frame> {
    if let Some(hash) = typed::write::<HashValue>(keyspace, context, key)? {
        return change(hash);
    }
    let mut hash = HashValue::new();
    let outcome = change(&mut hash)?;
    if !hash.is_empty() {
        typed::create(keyspace, context, key, hash);
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
    let (deleted, emptied) = match typed::write::<HashValue>(keyspace, context, key) {
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
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => hash.get(&arguments[2]).map_or(Frame::Null, bulk),
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn hmget(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let fields = &arguments[2..];
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
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
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.contains(&arguments[2]) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hlen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hstrlen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
        Ok(Some(hash)) => Frame::Integer(hash.get(&arguments[2]).map_or(0, <[u8]>::len) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn hgetall(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
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
    match typed::read::<HashValue>(keyspace, context, key) {
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
    let hash = match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
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
        return match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
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
    match typed::read::<HashValue>(keyspace, context, &arguments[1]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Harness, START_MS as NOW};

    fn bulk(text: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn int(value: i64) -> Frame {
        Frame::Integer(value)
    }

    fn error(text: &str) -> Frame {
        Frame::Error(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn array(items: &[&str]) -> Frame {
        Frame::Array(items.iter().map(|item| bulk(item)).collect())
    }

    fn map(pairs: &[(&str, &str)]) -> Frame {
        Frame::Map(
            pairs
                .iter()
                .map(|(field, value)| (bulk(field), bulk(value)))
                .collect(),
        )
    }

    /// A reply as it goes on the wire in `protocol`.
    fn wire(frame: &Frame, protocol: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        resp::encode(frame, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const SYNTAX: &str = "ERR syntax error";
    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        for (name, arity, write) in [
            ("hset", -4, true),
            ("hsetnx", 4, true),
            ("hmset", -4, true),
            ("hget", 3, false),
            ("hmget", -3, false),
            ("hgetall", 2, false),
            ("hdel", -3, true),
            ("hexists", 3, false),
            ("hlen", 2, false),
            ("hstrlen", 3, false),
            ("hkeys", 2, false),
            ("hvals", 2, false),
            ("hincrby", 4, true),
            ("hincrbyfloat", 4, true),
            ("hrandfield", -2, false),
            ("hscan", -3, false),
        ] {
            let spec = spec(name);
            assert_eq!(spec.arity, arity, "{name}");
            assert_eq!(spec.is_write(), write, "{name}");
            assert_eq!(spec.has(READONLY), !write, "{name}");
            assert_eq!(spec.legacy_key_range(), (1, 1, 1), "{name}");
            assert_eq!(spec.group, "hash", "{name}");
            assert!(spec.categories.contains(&"hash"), "{name}");
        }
        assert!(spec("hset").has(DENYOOM) && spec("hset").has(FAST));
        assert!(!spec("hdel").has(DENYOOM));
        assert!(!spec("hgetall").has(FAST));
        assert_eq!(spec("hgetall").tips, ["nondeterministic_output_order"]);
        assert_eq!(spec("hrandfield").tips, ["nondeterministic_output"]);
        assert_eq!(spec("hrandfield").since, "6.2.0");
        assert_eq!(spec("hincrbyfloat").since, "2.6.0");
        assert_eq!(spec("hstrlen").since, "3.2.0");
    }

    #[test]
    fn set_get_and_friends() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HSET", "h", "a", "1", "b", "2"]), int(2));
        assert_eq!(h.run(&["HSET", "h", "a", "10", "c", "3"]), int(1));
        assert_eq!(h.run(&["HGET", "h", "a"]), bulk("10"));
        assert_eq!(h.run(&["HGET", "h", "zz"]), Frame::Null);
        assert_eq!(h.run(&["HGET", "missing", "a"]), Frame::Null);
        assert_eq!(
            h.run(&["HMGET", "h", "a", "zz", "c"]),
            Frame::Array(vec![bulk("10"), Frame::Null, bulk("3")])
        );
        assert_eq!(
            h.run(&["HMGET", "missing", "a", "b"]),
            Frame::Array(vec![Frame::Null, Frame::Null])
        );
        assert_eq!(h.run(&["HLEN", "h"]), int(3));
        assert_eq!(h.run(&["HLEN", "missing"]), int(0));
        assert_eq!(h.run(&["HEXISTS", "h", "b"]), int(1));
        assert_eq!(h.run(&["HEXISTS", "h", "zz"]), int(0));
        assert_eq!(h.run(&["HEXISTS", "missing", "b"]), int(0));
        assert_eq!(h.run(&["HSTRLEN", "h", "a"]), int(2));
        assert_eq!(h.run(&["HSTRLEN", "h", "zz"]), int(0));
        assert_eq!(h.run(&["HSTRLEN", "missing", "a"]), int(0));
        // Small hashes answer in insertion order, as a listpack does.
        assert_eq!(h.run(&["HKEYS", "h"]), array(&["a", "b", "c"]));
        assert_eq!(h.run(&["HVALS", "h"]), array(&["10", "2", "3"]));
        assert_eq!(
            h.run(&["HGETALL", "h"]),
            map(&[("a", "10"), ("b", "2"), ("c", "3")])
        );
        assert_eq!(h.run(&["HKEYS", "missing"]), array(&[]));
        assert_eq!(h.run(&["HGETALL", "missing"]), Frame::Map(vec![]));
        assert_eq!(h.run(&["TYPE", "h"]), Frame::simple("hash"));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "h"]), bulk("listpack"));
        assert_eq!(h.run(&["HMSET", "h", "d", "4"]), Frame::OK);
        assert_eq!(h.run(&["HGET", "h", "d"]), bulk("4"));
        let binary: &[u8] = b"a\x00b\r\n";
        assert_eq!(h.run_bytes(&[b"HSET", b"bin", binary, binary]), int(1));
        assert_eq!(
            h.run_bytes(&[b"HGET", b"bin", binary]),
            Frame::Bulk(Bytes::from_static(b"a\x00b\r\n"))
        );
        // Empty field and value are fine.
        assert_eq!(h.run(&["HSET", "e", "", ""]), int(1));
        assert_eq!(h.run(&["HGET", "e", ""]), bulk(""));
    }

    #[test]
    fn reply_shapes_in_both_protocols() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "f", "v", "g", "w"]);
        let all = h.run(&["HGETALL", "h"]);
        assert_eq!(
            wire(&all, Protocol::Resp2),
            "*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\nw\r\n"
        );
        assert_eq!(
            wire(&all, Protocol::Resp3),
            "%2\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$1\r\nw\r\n"
        );
        let empty = h.run(&["HGETALL", "missing"]);
        assert_eq!(wire(&empty, Protocol::Resp2), "*0\r\n");
        assert_eq!(wire(&empty, Protocol::Resp3), "%0\r\n");
        let missing = h.run(&["HGET", "h", "nope"]);
        assert_eq!(wire(&missing, Protocol::Resp2), "$-1\r\n");
        assert_eq!(wire(&missing, Protocol::Resp3), "_\r\n");
        // HRANDFIELD WITHVALUES: flat in RESP2, pairs in RESP3.
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "5", "WITHVALUES"]),
            array(&["f", "v", "g", "w"])
        );
        h.context.protocol = Protocol::Resp3;
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "5", "WITHVALUES"]),
            Frame::Array(vec![array(&["f", "v"]), array(&["g", "w"])])
        );
        assert_eq!(h.run(&["HRANDFIELD", "h", "5"]), array(&["f", "g"]));
        let pairs = h.run(&["HRANDFIELD", "h", "-3", "WITHVALUES"]);
        let Frame::Array(items) = &pairs else {
            panic!("{pairs:?}");
        };
        assert_eq!(items.len(), 3);
        assert!(items
            .iter()
            .all(|item| *item == array(&["f", "v"]) || *item == array(&["g", "w"])));
    }

    #[test]
    fn wrong_arguments_and_types() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["HSET", "h", "a", "1", "b"]),
            error("ERR wrong number of arguments for 'hset' command")
        );
        assert_eq!(
            h.run(&["HMSET", "h", "a"]),
            error("ERR wrong number of arguments for 'hmset' command")
        );
        assert_eq!(
            h.run(&["HMSET", "h", "a", "1", "b"]),
            error("ERR wrong number of arguments for 'hmset' command")
        );
        assert_eq!(h.run(&["EXISTS", "h"]), int(0));
        h.set("s", "v");
        for words in [
            &["HSET", "s", "a", "1"][..],
            &["HSETNX", "s", "a", "1"],
            &["HMSET", "s", "a", "1"],
            &["HGET", "s", "a"],
            &["HMGET", "s", "a"],
            &["HGETALL", "s"],
            &["HDEL", "s", "a"],
            &["HEXISTS", "s", "a"],
            &["HLEN", "s"],
            &["HSTRLEN", "s", "a"],
            &["HKEYS", "s"],
            &["HVALS", "s"],
            &["HINCRBY", "s", "a", "1"],
            &["HINCRBYFLOAT", "s", "a", "1"],
            &["HRANDFIELD", "s"],
            &["HRANDFIELD", "s", "2"],
            &["HSCAN", "s", "0"],
            &["HSCAN", "s", "0", "BAD", "OPTION"],
        ] {
            assert_eq!(h.run(words), error(WRONGTYPE), "{words:?}");
        }
        h.run(&["HSET", "h", "f", "v"]);
        for words in [
            &["GET", "h"][..],
            &["LPUSH", "h", "x"],
            &["SADD", "h", "x"],
            &["INCR", "h"],
        ] {
            assert_eq!(h.run(words), error(WRONGTYPE), "{words:?}");
        }
        assert_eq!(h.run(&["GET", "s"]), bulk("v"));
    }

    #[test]
    fn hsetnx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HSETNX", "h", "f", "1"]), int(1));
        assert_eq!(h.run(&["HSETNX", "h", "f", "2"]), int(0));
        assert_eq!(h.run(&["HGET", "h", "f"]), bulk("1"));
        let long = "x".repeat(65);
        assert_eq!(h.run(&["HSETNX", "h", "g", &long]), int(1));
        assert_eq!(h.encoding("h"), Some("hashtable"));
    }

    #[test]
    fn hdel_deletes_emptied_hashes() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
        assert_eq!(h.run(&["HDEL", "h", "a", "zz", "a"]), int(1));
        assert_eq!(h.run(&["HKEYS", "h"]), array(&["b", "c"]));
        assert_eq!(h.run(&["HDEL", "missing", "a"]), int(0));
        assert_eq!(h.run(&["HDEL", "h", "b", "c", "d"]), int(2));
        assert_eq!(h.run(&["EXISTS", "h"]), int(0));
    }

    #[test]
    fn hincrby() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HINCRBY", "h", "n", "5"]), int(5));
        assert_eq!(h.run(&["HINCRBY", "h", "n", "-7"]), int(-2));
        assert_eq!(h.run(&["HGET", "h", "n"]), bulk("-2"));
        h.run(&[
            "HSET",
            "h",
            "s",
            "abc",
            "big",
            "9223372036854775807",
            "z",
            "007",
        ]);
        assert_eq!(
            h.run(&["HINCRBY", "h", "s", "1"]),
            error("ERR hash value is not an integer")
        );
        assert_eq!(
            h.run(&["HINCRBY", "h", "z", "1"]),
            error("ERR hash value is not an integer")
        );
        assert_eq!(
            h.run(&["HINCRBY", "h", "big", "1"]),
            error("ERR increment or decrement would overflow")
        );
        assert_eq!(h.run(&["HINCRBY", "h", "big", "-1"]), int(i64::MAX - 1));
        assert_eq!(h.run(&["HINCRBY", "h", "n", "x"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["HINCRBY", "h", "n", "1.5"]), error(NOT_INTEGER));
        // A failed increment on a new key leaves nothing behind.
        assert_eq!(h.run(&["HINCRBY", "new", "n", "x"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["EXISTS", "new"]), int(0));
        h.run(&["HSET", "m", "n", "-9223372036854775808"]);
        assert_eq!(
            h.run(&["HINCRBY", "m", "n", "-1"]),
            error("ERR increment or decrement would overflow")
        );
    }

    #[test]
    fn hincrbyfloat() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "f", "10.5"]), bulk("10.5"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "f", "0.1"]), bulk("10.6"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "f", "-5"]), bulk("5.6"));
        assert_eq!(h.run(&["HGET", "h", "f"]), bulk("5.6"));
        h.run(&["HSET", "h", "e", "5.0e3", "i", "3", "s", "abc"]);
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "e", "2.0e2"]), bulk("5200"));
        assert_eq!(h.run(&["HINCRBYFLOAT", "h", "i", "1.5"]), bulk("4.5"));
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "h", "s", "1"]),
            error("ERR hash value is not a float")
        );
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "h", "f", "x"]),
            error("ERR value is not a valid float")
        );
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "h", "f", "inf"]),
            error("ERR value is NaN or Infinity")
        );
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "h", "f", "nan"]),
            error("ERR value is not a valid float")
        );
        h.run(&["HSET", "h", "huge", "1.1e4932"]);
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "h", "huge", "1.1e4932"]),
            error("ERR increment would produce NaN or Infinity")
        );
        assert_eq!(h.run(&["HGET", "h", "huge"]), bulk("1.1e4932"));
        assert_eq!(
            h.run(&["HINCRBYFLOAT", "new", "f", "x"]),
            error("ERR value is not a valid float")
        );
        assert_eq!(h.run(&["EXISTS", "new"]), int(0));
        // A result longer than a listpack value converts the hash.
        h.run(&["HSET", "small", "f", "1"]);
        assert_eq!(h.encoding("small"), Some("listpack"));
        let Frame::Bulk(text) = h.run(&["HINCRBYFLOAT", "small", "f", "1e70"]) else {
            panic!("a float reply");
        };
        assert!(text.len() > 64);
        assert_eq!(h.encoding("small"), Some("hashtable"));
    }

    #[test]
    fn encodings_convert_as_in_redis() {
        let mut h = Harness::new();
        let mut words: Vec<String> = vec!["HSET".into(), "h".into()];
        for index in 0..512 {
            words.push(format!("f{index}"));
            words.push("v".into());
        }
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(h.run(&refs), int(512));
        assert_eq!(h.encoding("h"), Some("listpack"));
        h.run(&["HSET", "h", "f513", "v"]);
        assert_eq!(h.encoding("h"), Some("hashtable"));
        // Never back, however small it gets.
        for index in 0..512 {
            h.run(&["HDEL", "h", &format!("f{index}")]);
        }
        assert_eq!(h.encoding("h"), Some("hashtable"));
        assert_eq!(h.run(&["HGETALL", "h"]), map(&[("f513", "v")]));
        // Too many pairs in one write converts first, even with duplicates.
        let mut words: Vec<String> = vec!["HSET".into(), "d".into()];
        for _ in 0..513 {
            words.push("same".into());
            words.push("v".into());
        }
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(h.run(&refs), int(1));
        assert_eq!(h.encoding("d"), Some("hashtable"));
        // A long field or value converts.
        h.run(&["HSET", "l", "f", &"v".repeat(64)]);
        assert_eq!(h.encoding("l"), Some("listpack"));
        h.run(&["HSET", "l", &"f".repeat(65), "v"]);
        assert_eq!(h.encoding("l"), Some("hashtable"));
    }

    #[test]
    fn hrandfield() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["HRANDFIELD", "missing"]), Frame::Null);
        assert_eq!(h.run(&["HRANDFIELD", "missing", "3"]), array(&[]));
        assert_eq!(
            h.run(&["HRANDFIELD", "missing", "3", "WITHVALUES"]),
            array(&[])
        );
        h.run(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
        for _ in 0..20 {
            let Frame::Bulk(field) = h.run(&["HRANDFIELD", "h"]) else {
                panic!("a field");
            };
            assert!([&b"a"[..], b"b", b"c"].contains(&field.as_ref()));
        }
        assert_eq!(h.run(&["HRANDFIELD", "h", "0"]), array(&[]));
        assert_eq!(h.run(&["HRANDFIELD", "h", "3"]), array(&["a", "b", "c"]));
        assert_eq!(h.run(&["HRANDFIELD", "h", "100"]), array(&["a", "b", "c"]));
        // Distinct fields, in storage order.
        for _ in 0..20 {
            let Frame::Array(items) = h.run(&["HRANDFIELD", "h", "2"]) else {
                panic!("an array");
            };
            assert_eq!(items.len(), 2);
            assert_ne!(items[0], items[1]);
            assert!(items[0].as_bytes() < items[1].as_bytes());
        }
        let Frame::Array(items) = h.run(&["HRANDFIELD", "h", "-10"]) else {
            panic!("an array");
        };
        assert_eq!(items.len(), 10);
        let Frame::Array(items) = h.run(&["HRANDFIELD", "h", "-2", "WITHVALUES"]) else {
            panic!("an array");
        };
        assert_eq!(items.len(), 4);
        assert_eq!(h.run(&["HRANDFIELD", "h", "x"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "-9223372036854775808"]),
            error(COUNT_OUT_OF_RANGE)
        );
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"]),
            error("ERR value is out of range")
        );
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "1", "WITHSCORES"]),
            error(SYNTAX)
        );
        assert_eq!(
            h.run(&["HRANDFIELD", "h", "1", "WITHVALUES", "x"]),
            error(SYNTAX)
        );
        // The count is checked before the key.
        h.set("s", "v");
        assert_eq!(h.run(&["HRANDFIELD", "s", "x"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["HRANDFIELD", "s", "1", "bad"]), error(SYNTAX));
    }

    /// Two replicas with the same seed pick the same fields.
    #[test]
    fn random_picks_are_deterministic() {
        let run = || {
            let mut h = Harness::new();
            let mut words: Vec<String> = vec!["HSET".into(), "h".into()];
            for index in 0..300 {
                words.push(format!("f{index}"));
                words.push(index.to_string());
            }
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            h.run(&refs);
            let mut replies = Vec::new();
            for words in [
                &["HRANDFIELD", "h", "-5", "WITHVALUES"][..],
                &["HRANDFIELD", "h", "7"],
                &["HRANDFIELD", "h", "250"],
                &["HRANDFIELD", "h"],
            ] {
                for _ in 0..10 {
                    replies.push(h.run(words));
                }
            }
            replies
        };
        let first = run();
        assert_eq!(first, run());
        assert!(first.windows(2).any(|pair| pair[0] != pair[1]));
    }

    fn scan_all(h: &mut Harness, key: &str, extra: &[&str]) -> (usize, Vec<(String, String)>) {
        let mut cursor = "0".to_string();
        let mut seen = Vec::new();
        let mut calls = 0;
        loop {
            let mut words = vec!["HSCAN", key, &cursor];
            words.extend_from_slice(extra);
            let Frame::Array(reply) = h.run(&words) else {
                panic!("HSCAN reply");
            };
            calls += 1;
            let Frame::Array(items) = &reply[1] else {
                panic!("HSCAN items");
            };
            for pair in items.chunks(2) {
                let text =
                    |frame: &Frame| String::from_utf8_lossy(frame.as_bytes().unwrap()).into_owned();
                seen.push((text(&pair[0]), text(&pair[1])));
            }
            cursor = String::from_utf8_lossy(reply[0].as_bytes().unwrap()).into_owned();
            if cursor == "0" {
                return (calls, seen);
            }
        }
    }

    #[test]
    fn hscan() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["HSCAN", "missing", "0"]),
            Frame::Array(vec![bulk("0"), array(&[])])
        );
        // As Redis: a missing key answers before the options are read.
        assert_eq!(
            h.run(&["HSCAN", "missing", "0", "COUNT", "0"]),
            Frame::Array(vec![bulk("0"), array(&[])])
        );
        h.run(&["HSET", "h", "a", "1", "b", "2", "ab", "3"]);
        // A listpack answers whole, whatever the count.
        assert_eq!(
            h.run(&["HSCAN", "h", "0", "COUNT", "1"]),
            Frame::Array(vec![bulk("0"), array(&["a", "1", "b", "2", "ab", "3"])])
        );
        assert_eq!(
            h.run(&["HSCAN", "h", "0", "MATCH", "a*"]),
            Frame::Array(vec![bulk("0"), array(&["a", "1", "ab", "3"])])
        );
        assert_eq!(h.run(&["HSCAN", "h", "x"]), error("ERR invalid cursor"));
        assert_eq!(h.run(&["HSCAN", "h", "0", "COUNT", "0"]), error(SYNTAX));
        assert_eq!(
            h.run(&["HSCAN", "h", "0", "COUNT", "x"]),
            error(NOT_INTEGER)
        );
        assert_eq!(h.run(&["HSCAN", "h", "0", "COUNT"]), error(SYNTAX));
        assert_eq!(h.run(&["HSCAN", "h", "0", "TYPE", "hash"]), error(SYNTAX));
        assert_eq!(h.run(&["HSCAN", "h", "0", "NOVALUES"]), error(SYNTAX));

        // A hashtable is walked in steps; every pair comes back once.
        for index in 0..1000 {
            h.run(&["HSET", "big", &format!("f{index}"), &index.to_string()]);
        }
        let (calls, seen) = scan_all(&mut h, "big", &["COUNT", "20"]);
        assert_eq!(calls, 50);
        let mut fields: Vec<_> = seen.iter().map(|(field, _)| field.clone()).collect();
        fields.sort();
        fields.dedup();
        assert_eq!(fields.len(), 1000);
        assert!(seen.iter().all(|(field, value)| field[1..] == *value));
        let (_, matched) = scan_all(&mut h, "big", &["MATCH", "f1?", "COUNT", "7"]);
        assert_eq!(matched.len(), 10);
    }

    /// Fields present for a whole HSCAN come back even while the hash changes.
    #[test]
    fn hscan_guarantee_under_changes() {
        let mut h = Harness::new();
        for index in 0..400 {
            h.run(&["HSET", "big", &format!("keep{index}"), "v"]);
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = "0".to_string();
        let mut round = 0;
        loop {
            let Frame::Array(reply) = h.run(&["HSCAN", "big", &cursor, "COUNT", "9"]) else {
                panic!("HSCAN reply");
            };
            let Frame::Array(items) = &reply[1] else {
                panic!("items");
            };
            for pair in items.chunks(2) {
                seen.insert(pair[0].as_bytes().unwrap().to_vec());
            }
            cursor = String::from_utf8_lossy(reply[0].as_bytes().unwrap()).into_owned();
            round += 1;
            h.run(&[
                "HSET",
                "big",
                &format!("new{round}"),
                "v",
                &format!("tmp{round}"),
                "v",
            ]);
            h.run(&["HDEL", "big", &format!("tmp{}", round - 1)]);
            if cursor == "0" {
                break;
            }
        }
        for index in 0..400 {
            assert!(
                seen.contains(format!("keep{index}").as_bytes()),
                "keep{index}"
            );
        }
    }

    #[test]
    fn dump_restore_digest_and_copy() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "b", "2", "a", "1", "long", &"x".repeat(30)]);
        let Frame::Bulk(payload) = h.run(&["DUMP", "h"]) else {
            panic!("DUMP of a hash");
        };
        assert_eq!(
            h.run_bytes(&[b"RESTORE", b"copy", b"0", &payload]),
            Frame::OK
        );
        assert_eq!(h.run(&["HGETALL", "copy"]), h.run(&["HGETALL", "h"]));
        assert_eq!(h.encoding("copy"), Some("listpack"));
        let value_digest = |h: &Harness, key: &str| crate::digest::value_digest(h.entry(key));
        assert_eq!(value_digest(&h, "h"), value_digest(&h, "copy"));
        h.run(&["HSET", "copy", "a", "changed"]);
        assert_ne!(value_digest(&h, "h"), value_digest(&h, "copy"));

        for index in 0..700 {
            h.run(&["HSET", "big", &format!("f{index}"), "v"]);
        }
        for index in (0..700).step_by(7) {
            h.run(&["HDEL", "big", &format!("f{index}")]);
        }
        let Frame::Bulk(payload) = h.run(&["DUMP", "big"]) else {
            panic!("DUMP of a hash");
        };
        h.run_bytes(&[b"RESTORE", b"big2", b"0", &payload]);
        assert_eq!(h.encoding("big2"), Some("hashtable"));
        assert_eq!(h.get("big2"), h.get("big"), "same pairs in the same order");
        assert_eq!(h.run(&["HKEYS", "big2"]), h.run(&["HKEYS", "big"]));
        assert_eq!(h.run(&["COPY", "big", "big3"]), int(1));
        assert_eq!(
            h.run(&["HSCAN", "big3", "0"]),
            h.run(&["HSCAN", "big", "0"])
        );
        assert_eq!(h.encoding("big3"), Some("hashtable"));
        // RENAME keeps the value.
        assert_eq!(h.run(&["RENAME", "big3", "big4"]), Frame::OK);
        assert_eq!(h.run(&["HLEN", "big4"]), int(600));
        // Corrupt payloads are refused.
        let mut bad = payload.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(
            h.run_bytes(&[b"RESTORE", b"bad", b"0", &bad]),
            error("ERR DUMP payload version or checksum are wrong")
        );
        let digest_before = crate::digest::digest(&h.keyspace, NOW);
        h.run(&["HSET", "h", "zz", "1"]);
        assert_ne!(crate::digest::digest(&h.keyspace, NOW), digest_before);
        h.run(&["HDEL", "h", "zz"]);
        assert_eq!(crate::digest::digest(&h.keyspace, NOW), digest_before);
    }

    #[test]
    fn debug_object_lengths() {
        let mut h = Harness::new();
        h.run(&["HSET", "small", "field", "12"]);
        let line = crate::digest::debug_object(&h.keyspace, h.entry("small").unwrap(), &h.context);
        // One listpack blob: 1 length byte, 7 + 7 + 2 listpack bytes.
        assert!(
            line.contains(" encoding:listpack serializedlength:17 "),
            "{line}"
        );
        h.run(&["HSET", "big", "f", &"v".repeat(100)]);
        let line = crate::digest::debug_object(&h.keyspace, h.entry("big").unwrap(), &h.context);
        // Count, then "f" (2) and the value (2 + 100).
        assert!(
            line.contains(" encoding:hashtable serializedlength:105 "),
            "{line}"
        );
    }

    #[test]
    fn dirty_counts_changes() {
        let mut h = Harness::new();
        let start = h.keyspace.stats.dirty;
        h.run(&["HSET", "h", "a", "1", "b", "2"]);
        assert_eq!(h.keyspace.stats.dirty, start + 2);
        h.run(&["HSETNX", "h", "a", "1"]);
        h.run(&["HDEL", "h", "zz"]);
        h.run(&["HGETALL", "h"]);
        assert_eq!(h.keyspace.stats.dirty, start + 2);
        h.run(&["HDEL", "h", "a", "b"]);
        h.run(&["HINCRBY", "h", "n", "1"]);
        assert_eq!(h.keyspace.stats.dirty, start + 5);
    }

    #[test]
    fn writes_keep_the_ttl_and_expired_keys_start_over() {
        let mut h = Harness::new();
        h.run(&["HSET", "h", "a", "1"]);
        h.run(&["PEXPIRE", "h", "100"]);
        h.run(&["HSET", "h", "b", "2"]);
        assert_eq!(h.expire_at("h"), Some(NOW + 100));
        h.advance(200);
        assert_eq!(h.run(&["HLEN", "h"]), int(0));
        assert_eq!(h.run(&["HSET", "h", "c", "3"]), int(1));
        assert_eq!(h.run(&["HGETALL", "h"]), map(&[("c", "3")]));
        assert_eq!(h.expire_at("h"), None);
    }
}
