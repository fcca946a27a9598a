//! List commands: the Redis 7.2 list family, blocking forms included.
//!
//! Argument checks, lookups and type checks happen in the order Redis does them,
//! so the same bad request gets the same error. A list whose last element goes is
//! deleted. Encodings change as Redis's do (see `list.rs`): the growth check runs
//! before elements are added, the shrink check after they are removed.
//!
//! **Blocking contract.** The keyspace never waits. A blocking command validates
//! its arguments, then serves at once exactly like its non-blocking form when it
//! can. When it cannot, it answers the timeout reply (nil array for BLPOP, BRPOP
//! and BLMPOP; nil bulk for BLMOVE and BRPOPLPUSH) and records a [`BlockOn`] in
//! [`Context::block`]; the node decides whether to hold the client (not inside
//! MULTI or a script, where Redis answers the timeout reply at once too) and runs
//! the command again when a key it waits for is reported by
//! [`Keyspace::take_ready_keys`]. Every command that adds elements to a list
//! records that key as ready.

use super::strings::long_double::LongDouble;
use super::typed;
use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::keyspace::BlockOn;
use crate::value::{End, ListValue};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;
use std::collections::BTreeSet;

const PUSH_COMPLEXITY: &str = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.";
const POP_COMPLEXITY: &str = "O(N) where N is the number of elements returned";
const MPOP_COMPLEXITY: &str =
    "O(N+M) where N is the number of provided keys and M is the number of elements returned.";

/// The first key: read and write, elements taken and the list maybe deleted.
const POPPED: KeySpec = KeySpec::single(1, RW | ACCESS | DELETE);
/// A destination that receives elements.
const DESTINATION: KeySpec = KeySpec::single(2, RW | INSERT);

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "blmove",
        arity: 6,
        flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        key_specs: &[POPPED, DESTINATION],
        categories: &["write", "list", "slow", "blocking"],
        group: "list",
        summary: "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.",
        since: "6.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(blmove),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "blmpop",
        arity: -5,
        flags: WRITE | BLOCKING,
        key_specs: &[KeySpec::counted(2, RW | ACCESS | DELETE)],
        categories: &["write", "list", "slow", "blocking"],
        group: "list",
        summary: "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        since: "7.0.0",
        complexity: MPOP_COMPLEXITY,
        handler: Handler::Keyspace(blmpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "blpop",
        arity: -3,
        flags: WRITE | NOSCRIPT | BLOCKING,
        key_specs: &[KeySpec::range(1, -2, 1, RW | ACCESS | DELETE)],
        categories: &["write", "list", "slow", "blocking"],
        group: "list",
        summary: "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of provided keys.",
        handler: Handler::Keyspace(blpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "brpop",
        arity: -3,
        flags: WRITE | NOSCRIPT | BLOCKING,
        key_specs: &[KeySpec::range(1, -2, 1, RW | ACCESS | DELETE)],
        categories: &["write", "list", "slow", "blocking"],
        group: "list",
        summary: "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
        since: "2.0.0",
        complexity: "O(N) where N is the number of provided keys.",
        handler: Handler::Keyspace(brpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "brpoplpush",
        arity: 4,
        flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING,
        key_specs: &[POPPED, DESTINATION],
        categories: &["write", "list", "slow", "blocking"],
        group: "list",
        summary: "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.",
        since: "2.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(brpoplpush),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lindex",
        arity: 3,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "list", "slow"],
        group: "list",
        summary: "Returns an element from a list by its index.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        handler: Handler::Keyspace(lindex),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "linsert",
        arity: 5,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Inserts an element before or after another element in a list.",
        since: "2.2.0",
        complexity: "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
        handler: Handler::Keyspace(linsert),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "llen",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "list", "fast"],
        group: "list",
        summary: "Returns the length of a list.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(llen),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lmove",
        arity: 5,
        flags: WRITE | DENYOOM,
        key_specs: &[POPPED, DESTINATION],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.",
        since: "6.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(lmove),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lmpop",
        arity: -4,
        flags: WRITE,
        key_specs: &[KeySpec::counted(1, RW | ACCESS | DELETE)],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.",
        since: "7.0.0",
        complexity: MPOP_COMPLEXITY,
        handler: Handler::Keyspace(lmpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpop",
        arity: -2,
        flags: WRITE | FAST,
        key_specs: &[POPPED],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.",
        since: "1.0.0",
        complexity: POP_COMPLEXITY,
        handler: Handler::Keyspace(lpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpos",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "list", "slow"],
        group: "list",
        summary: "Returns the index of matching elements in a list.",
        since: "6.0.6",
        complexity: "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        handler: Handler::Keyspace(lpos),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpush",
        arity: -3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Prepends one or more elements to a list. Creates the key if it doesn't exist.",
        since: "1.0.0",
        complexity: PUSH_COMPLEXITY,
        handler: Handler::Keyspace(lpush),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lpushx",
        arity: -3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Prepends one or more elements to a list only when the list exists.",
        since: "2.2.0",
        complexity: PUSH_COMPLEXITY,
        handler: Handler::Keyspace(lpushx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lrange",
        arity: 4,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "list", "slow"],
        group: "list",
        summary: "Returns a range of elements from a list.",
        since: "1.0.0",
        complexity: "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        handler: Handler::Keyspace(lrange),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lrem",
        arity: 4,
        flags: WRITE,
        key_specs: &[KeySpec::single(1, RW | DELETE)],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Removes elements from a list. Deletes the list if the last element was removed.",
        since: "1.0.0",
        complexity: "O(N+M) where N is the length of the list and M is the number of elements removed.",
        handler: Handler::Keyspace(lrem),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lset",
        arity: 4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | UPDATE)],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Sets the value of an element in a list by its index.",
        since: "1.0.0",
        complexity: "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        handler: Handler::Keyspace(lset),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "ltrim",
        arity: 4,
        flags: WRITE,
        key_specs: &[KeySpec::single(1, RW | DELETE)],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Removes elements from both ends a list. Deletes the list if all elements were trimmed.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of elements to be removed by the operation.",
        handler: Handler::Keyspace(ltrim),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpop",
        arity: -2,
        flags: WRITE | FAST,
        key_specs: &[POPPED],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Returns and removes the last elements of a list. Deletes the list if the last element was popped.",
        since: "1.0.0",
        complexity: POP_COMPLEXITY,
        handler: Handler::Keyspace(rpop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpoplpush",
        arity: 3,
        flags: WRITE | DENYOOM,
        key_specs: &[POPPED, DESTINATION],
        categories: &["write", "list", "slow"],
        group: "list",
        summary: "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.",
        since: "1.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(rpoplpush),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpush",
        arity: -3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Appends one or more elements to a list. Creates the key if it doesn't exist.",
        since: "1.0.0",
        complexity: PUSH_COMPLEXITY,
        handler: Handler::Keyspace(rpush),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rpushx",
        arity: -3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "list", "fast"],
        group: "list",
        summary: "Appends an element to a list only when the list exists.",
        since: "2.2.0",
        complexity: PUSH_COMPLEXITY,
        handler: Handler::Keyspace(rpushx),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
const TIMEOUT_OUT_OF_RANGE: &str = "ERR timeout is out of range";
const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";
const COUNT_NOT_POSITIVE: &str = "ERR count should be greater than 0";
const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
const RANK_OUT_OF_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";

// ---- Shared helpers ---------------------------------------------------------------

/// After elements were removed: whether the list is now empty (the caller
/// deletes it), else the shrinking encoding check.
fn settle(list: &mut ListValue) -> bool {
    if list.is_empty() {
        return true;
    }
    list.shrink_check();
    false
}

/// Accounts for `removed` elements taken from the list at `key`, deleting the
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

fn parse_end(argument: &[u8]) -> Result<End, Frame> {
    if args::is_keyword(argument, "LEFT") {
        Ok(End::Head)
    } else if args::is_keyword(argument, "RIGHT") {
        Ok(End::Tail)
    } else {
        Err(Frame::error(errors::SYNTAX))
    }
}

/// An integer within 0..=i64::MAX; `error` for anything else (Redis's
/// `getPositiveLongFromObjectOrReply` uses its message for both cases).
fn parse_non_negative(argument: &[u8], error: &'static str) -> Result<usize, Frame> {
    crate::value::canonical_i64(argument)
        .filter(|&value| value >= 0)
        .map(|value| value as usize)
        .ok_or_else(|| Frame::error(error))
}

/// An integer of at least 1; `error` for anything else.
fn parse_positive(argument: &[u8], error: &'static str) -> Result<usize, Frame> {
    parse_non_negative(argument, error).and_then(|value| {
        if value == 0 {
            Err(Frame::error(error))
        } else {
            Ok(value)
        }
    })
}

/// A blocking timeout in seconds as Redis reads it: a `long double`, times
/// 1000, rounded up to whole milliseconds; 0 waits forever.
pub(crate) fn parse_timeout(argument: &[u8], now_ms: u64) -> Result<u64, Frame> {
    let seconds = LongDouble::parse(argument).ok_or_else(|| Frame::error(TIMEOUT_NOT_FLOAT))?;
    let milliseconds = seconds
        .mul_small(1000)
        .ceil_i64()
        .ok_or_else(|| Frame::error(TIMEOUT_OUT_OF_RANGE))?;
    if milliseconds < 0 {
        return Err(Frame::error(TIMEOUT_NEGATIVE));
    }
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    if milliseconds > i64::MAX - now {
        return Err(Frame::error(TIMEOUT_OUT_OF_RANGE));
    }
    Ok(milliseconds as u64)
}

/// Records that the command waits for `keys` (each once, in order).
pub(crate) fn block_on(context: &mut Context, keys: &[Bytes], timeout_ms: u64) {
    let mut seen: BTreeSet<&[u8]> = BTreeSet::new();
    let mut unique = Vec::new();
    for key in keys {
        if seen.insert(key) {
            unique.push(key.clone());
        }
    }
    context.block = Some(BlockOn {
        db: context.db,
        keys: unique,
        timeout_ms,
        arguments: None,
    });
}

/// Resolves Redis's start/stop indexes (negative from the end) over `length`
/// elements to an inclusive range, or None when it selects nothing.
fn resolve_range(start: i64, stop: i64, length: usize) -> Option<(usize, usize)> {
    let length = i64::try_from(length).ok()?;
    let start = if start < 0 { length + start } else { start }.max(0);
    let stop = if stop < 0 { length + stop } else { stop };
    if start > stop || start >= length {
        return None;
    }
    Some((start as usize, stop.min(length - 1) as usize))
}

/// Pops up to `count` elements from `end`, in the order they come off.
fn pop_many(list: &mut ListValue, end: End, count: usize) -> Vec<Frame> {
    let count = count.min(list.len());
    let mut popped = Vec::with_capacity(count);
    for _ in 0..count {
        if let Some(element) = list.pop(end) {
            popped.push(Frame::Bulk(element.into_bytes()));
        }
    }
    popped
}

// ---- Pushes -------------------------------------------------------------------------

fn push_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    end: End,
    only_if_exists: bool,
) -> Frame {
    let key = &arguments[1];
    let elements = &arguments[2..];
    let added = elements
        .iter()
        .fold(0usize, |total, element| total.saturating_add(element.len()));
    let push_all = |list: &mut ListValue| {
        list.grow_check(added);
        for element in elements {
            list.push(end, element);
        }
        list.len()
    };
    let length = match typed::write::<ListValue>(keyspace, context, key) {
        Err(error) => return error,
        Ok(Some(list)) => push_all(list),
        Ok(None) if only_if_exists => return Frame::Integer(0),
        Ok(None) => {
            let mut list = ListValue::new();
            let length = push_all(&mut list);
            typed::create(keyspace, context, key, list);
            length
        }
    };
    keyspace.stats.dirty += elements.len() as u64;
    keyspace.signal_ready(context.db, key);
    Frame::Integer(length as i64)
}

fn lpush(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    push_generic(keyspace, context, arguments, End::Head, false)
}

fn rpush(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    push_generic(keyspace, context, arguments, End::Tail, false)
}

fn lpushx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    push_generic(keyspace, context, arguments, End::Head, true)
}

fn rpushx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    push_generic(keyspace, context, arguments, End::Tail, true)
}

// ---- Pops ---------------------------------------------------------------------------

/// LPOP / RPOP: without a count, one element as a bulk string (nil when the key
/// is absent); with one, an array of up to count elements (nil array when the
/// key is absent, empty array for a count of 0).
fn pop_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    end: End,
) -> Frame {
    if arguments.len() > 3 {
        return Frame::error_owned(errors::wrong_arity(if end == End::Head {
            "lpop"
        } else {
            "rpop"
        }));
    }
    let count = match arguments.get(2) {
        Some(argument) => match parse_non_negative(argument, NOT_POSITIVE) {
            Ok(count) => Some(count),
            Err(error) => return error,
        },
        None => None,
    };
    let key = &arguments[1];
    let (reply, removed, emptied) = match typed::write::<ListValue>(keyspace, context, key) {
        Err(error) => return error,
        Ok(None) if count.is_some() => return Frame::NullArray,
        Ok(None) => return Frame::Null,
        Ok(Some(_)) if count == Some(0) => return Frame::Array(Vec::new()),
        Ok(Some(list)) => match count {
            None => match list.pop(end) {
                Some(element) => (Frame::Bulk(element.into_bytes()), 1, settle(list)),
                None => return Frame::Null,
            },
            Some(count) => {
                let popped = pop_many(list, end, count);
                let removed = popped.len();
                (Frame::Array(popped), removed, settle(list))
            }
        },
    };
    finish_removal(keyspace, context, key, removed, emptied);
    reply
}

fn lpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    pop_generic(keyspace, context, arguments, End::Head)
}

fn rpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    pop_generic(keyspace, context, arguments, End::Tail)
}

/// Pops one element from the first non-empty list among `keys`: `[key, element]`.
/// `Ok(None)` when every key is absent; WRONGTYPE at the first key of another
/// type met before a list.
fn pop_first_of(
    keyspace: &mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
    end: End,
) -> Result<Option<Frame>, Frame> {
    for key in keys {
        let (element, emptied) = match typed::write::<ListValue>(keyspace, context, key)? {
            None => continue,
            Some(list) => match list.pop(end) {
                Some(element) => (element, settle(list)),
                None => continue,
            },
        };
        finish_removal(keyspace, context, key, 1, emptied);
        return Ok(Some(Frame::Array(vec![
            Frame::Bulk(key.clone()),
            Frame::Bulk(element.into_bytes()),
        ])));
    }
    Ok(None)
}

/// Pops up to `count` elements from the first non-empty list among `keys`:
/// `[key, [elements]]`.
fn pop_many_of_first(
    keyspace: &mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
    end: End,
    count: usize,
) -> Result<Option<Frame>, Frame> {
    for key in keys {
        let (popped, emptied) = match typed::write::<ListValue>(keyspace, context, key)? {
            None => continue,
            Some(list) if list.is_empty() => continue,
            Some(list) => {
                let popped = pop_many(list, end, count);
                (popped, settle(list))
            }
        };
        finish_removal(keyspace, context, key, popped.len(), emptied);
        return Ok(Some(Frame::Array(vec![
            Frame::Bulk(key.clone()),
            Frame::Array(popped),
        ])));
    }
    Ok(None)
}

/// LMPOP / BLMPOP arguments after the numkeys position.
struct MultiPop<'a> {
    keys: &'a [Bytes],
    end: End,
    count: usize,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT count]` starting at `numkeys_index`,
/// with Redis's checks in Redis's order.
fn parse_multi_pop(arguments: &[Bytes], numkeys_index: usize) -> Result<MultiPop<'_>, Frame> {
    let numkeys = parse_positive(&arguments[numkeys_index], NUMKEYS_NOT_POSITIVE)?;
    let where_index = numkeys
        .checked_add(numkeys_index + 1)
        .filter(|&index| index < arguments.len())
        .ok_or_else(|| Frame::error(errors::SYNTAX))?;
    let end = parse_end(&arguments[where_index])?;
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
        end,
        count: count.unwrap_or(1),
    })
}

fn lmpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let request = match parse_multi_pop(arguments, 1) {
        Ok(request) => request,
        Err(error) => return error,
    };
    match pop_many_of_first(keyspace, context, request.keys, request.end, request.count) {
        Ok(Some(reply)) => reply,
        Ok(None) => Frame::NullArray,
        Err(error) => error,
    }
}

// ---- Blocking pops --------------------------------------------------------------------

fn blocking_pop(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    end: End,
) -> Frame {
    let (keys, timeout) = arguments[1..].split_at(arguments.len() - 2);
    let timeout_ms = match parse_timeout(&timeout[0], context.now_ms) {
        Ok(timeout_ms) => timeout_ms,
        Err(error) => return error,
    };
    match pop_first_of(keyspace, context, keys, end) {
        Ok(Some(reply)) => reply,
        Ok(None) => {
            block_on(context, keys, timeout_ms);
            Frame::NullArray
        }
        Err(error) => error,
    }
}

fn blpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    blocking_pop(keyspace, context, arguments, End::Head)
}

fn brpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    blocking_pop(keyspace, context, arguments, End::Tail)
}

fn blmpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // As Redis: numkeys, direction and count are checked before the timeout.
    let request = match parse_multi_pop(arguments, 2) {
        Ok(request) => request,
        Err(error) => return error,
    };
    let timeout_ms = match parse_timeout(&arguments[1], context.now_ms) {
        Ok(timeout_ms) => timeout_ms,
        Err(error) => return error,
    };
    match pop_many_of_first(keyspace, context, request.keys, request.end, request.count) {
        Ok(Some(reply)) => reply,
        Ok(None) => {
            block_on(context, request.keys, timeout_ms);
            Frame::NullArray
        }
        Err(error) => error,
    }
}

// ---- LMOVE and friends ------------------------------------------------------------------

/// Moves one element from `source`'s `from` end to `destination`'s `to` end and
/// answers it; nil bulk when `source` is absent. The destination's type is
/// checked before anything changes.
fn move_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    source: &[u8],
    destination: &[u8],
    (from, to): (End, End),
) -> Frame {
    match typed::write::<ListValue>(keyspace, context, source) {
        Err(error) => return error,
        Ok(None) => return Frame::Null,
        Ok(Some(list)) if list.is_empty() => return Frame::Null,
        Ok(Some(_)) => {}
    }
    if source == destination {
        return rotate(keyspace, context, source, (from, to));
    }
    let destination_exists = match typed::write::<ListValue>(keyspace, context, destination) {
        Err(error) => return error,
        Ok(found) => found.is_some(),
    };
    let Ok(Some(list)) = typed::write::<ListValue>(keyspace, context, source) else {
        return Frame::Null;
    };
    let Some(element) = list.pop(from) else {
        return Frame::Null;
    };
    let emptied = settle(list);
    let reply = Bytes::copy_from_slice(element.as_bytes());
    let place = |list: &mut ListValue| {
        list.grow_check(element.as_bytes().len());
        list.push_element(to, element);
    };
    if destination_exists {
        if let Ok(Some(list)) = typed::write::<ListValue>(keyspace, context, destination) {
            place(list);
        }
    } else {
        let mut list = ListValue::new();
        place(&mut list);
        typed::create(keyspace, context, destination, list);
    }
    keyspace.signal_ready(context.db, destination);
    finish_removal(keyspace, context, source, 1, emptied);
    Frame::Bulk(reply)
}

/// LMOVE with the same source and destination: the element goes from one end
/// to the other (or back where it was), and the list is never deleted.
fn rotate(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    (from, to): (End, End),
) -> Frame {
    let Ok(Some(list)) = typed::write::<ListValue>(keyspace, context, key) else {
        return Frame::Null;
    };
    let Some(element) = list.pop(from) else {
        return Frame::Null;
    };
    let reply = Bytes::copy_from_slice(element.as_bytes());
    list.grow_check(reply.len());
    list.push_element(to, element);
    list.shrink_check();
    keyspace.signal_ready(context.db, key);
    keyspace.stats.dirty += 1;
    Frame::Bulk(reply)
}

fn lmove(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let ends = match (parse_end(&arguments[3]), parse_end(&arguments[4])) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(error), _) | (_, Err(error)) => return error,
    };
    move_generic(keyspace, context, &arguments[1], &arguments[2], ends)
}

fn rpoplpush(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let ends = (End::Tail, End::Head);
    move_generic(keyspace, context, &arguments[1], &arguments[2], ends)
}

/// BLMOVE / BRPOPLPUSH once their arguments are valid: moves at once when the
/// source holds a list, else waits for the source alone (the destination's type
/// is only checked when there is something to move, as in Redis).
fn blocking_move(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    ends: (End, End),
    timeout_ms: u64,
) -> Frame {
    let source = &arguments[1];
    match typed::write::<ListValue>(keyspace, context, source) {
        Err(error) => error,
        Ok(None) => {
            block_on(context, std::slice::from_ref(source), timeout_ms);
            Frame::Null
        }
        Ok(Some(_)) => move_generic(keyspace, context, source, &arguments[2], ends),
    }
}

fn blmove(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let ends = match (parse_end(&arguments[3]), parse_end(&arguments[4])) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(error), _) | (_, Err(error)) => return error,
    };
    match parse_timeout(&arguments[5], context.now_ms) {
        Ok(timeout_ms) => blocking_move(keyspace, context, arguments, ends, timeout_ms),
        Err(error) => error,
    }
}

fn brpoplpush(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match parse_timeout(&arguments[3], context.now_ms) {
        Ok(timeout_ms) => blocking_move(
            keyspace,
            context,
            arguments,
            (End::Tail, End::Head),
            timeout_ms,
        ),
        Err(error) => error,
    }
}

// ---- Reads --------------------------------------------------------------------------

fn llen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<ListValue>(keyspace, context, &arguments[1]) {
        Ok(Some(list)) => Frame::Integer(list.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn lrange(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let (start, stop) = match (
        args::parse_i64(&arguments[2]),
        args::parse_i64(&arguments[3]),
    ) {
        (Ok(start), Ok(stop)) => (start, stop),
        (Err(error), _) | (_, Err(error)) => return error,
    };
    let list = match typed::read::<ListValue>(keyspace, context, &arguments[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return Frame::Array(Vec::new()),
        Err(error) => return error,
    };
    let Some((first, last)) = resolve_range(start, stop, list.len()) else {
        return Frame::Array(Vec::new());
    };
    // Room for short elements; longer ones grow the buffer.
    let mut array = resp::BulkArray::with_capacity((last - first + 1).min(4096) * 16);
    for element in list.range(first, last) {
        array.push(element);
    }
    Frame::Bulks(array)
}

fn lindex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // As Redis: the key is looked up before the index is parsed.
    let list = match typed::read::<ListValue>(keyspace, context, &arguments[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return Frame::Null,
        Err(error) => return error,
    };
    let index = match args::parse_i64(&arguments[2]) {
        Ok(index) => index,
        Err(error) => return error,
    };
    let position = if index < 0 {
        (list.len() as i64).checked_add(index)
    } else {
        Some(index)
    };
    position
        .and_then(|position| usize::try_from(position).ok())
        .and_then(|position| list.get(position))
        .map_or(Frame::Null, Frame::bulk_from_slice)
}

/// LPOS options: which match to start from, how many to report, how far to look.
struct PositionQuery {
    /// 1-based match to start from; negative searches from the tail.
    rank: i64,
    /// None without COUNT (one index or nil); Some(0) for all matches.
    count: Option<usize>,
    /// Elements to compare at most; 0 for all.
    max_length: usize,
}

fn parse_position_query(options: &[Bytes]) -> Result<PositionQuery, Frame> {
    let mut query = PositionQuery {
        rank: 1,
        count: None,
        max_length: 0,
    };
    let mut index = 0;
    while let Some(option) = options.get(index) {
        let Some(value) = options.get(index + 1) else {
            return Err(Frame::error(errors::SYNTAX));
        };
        if args::is_keyword(option, "RANK") {
            query.rank = args::parse_i64(value)?;
            if query.rank == i64::MIN {
                return Err(Frame::error(RANK_OUT_OF_RANGE));
            }
            if query.rank == 0 {
                return Err(Frame::error(RANK_ZERO));
            }
        } else if args::is_keyword(option, "COUNT") {
            query.count = Some(parse_non_negative(value, COUNT_NEGATIVE)?);
        } else if args::is_keyword(option, "MAXLEN") {
            query.max_length = parse_non_negative(value, MAXLEN_NEGATIVE)?;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
        index += 2;
    }
    Ok(query)
}

/// The indexes of matches `rank`, `rank + 1`, ... of `element`, at most `limit`
/// of them (0: all), looking at no more than `max_length` elements (0: all).
fn find_positions(
    list: &ListValue,
    element: &[u8],
    query: &PositionQuery,
    limit: usize,
) -> Vec<i64> {
    let from_tail = query.rank < 0;
    let skip = query.rank.unsigned_abs() - 1;
    let length = list.len();
    let scanned = if query.max_length == 0 {
        length
    } else {
        query.max_length.min(length)
    };
    let mut found = Vec::new();
    let mut matches: u64 = 0;
    for step in 0..scanned {
        let index = if from_tail { length - 1 - step } else { step };
        if list.get(index) != Some(element) {
            continue;
        }
        matches += 1;
        if matches > skip {
            found.push(index as i64);
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
    }
    found
}

fn lpos(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let query = match parse_position_query(&arguments[3..]) {
        Ok(query) => query,
        Err(error) => return error,
    };
    let list = match typed::read::<ListValue>(keyspace, context, &arguments[1]) {
        Ok(Some(list)) => list,
        Ok(None) if query.count.is_some() => return Frame::Array(Vec::new()),
        Ok(None) => return Frame::Null,
        Err(error) => return error,
    };
    let element = &arguments[2];
    match query.count {
        Some(count) => Frame::Array(
            find_positions(list, element, &query, count)
                .into_iter()
                .map(Frame::Integer)
                .collect(),
        ),
        None => find_positions(list, element, &query, 1)
            .first()
            .map_or(Frame::Null, |&index| Frame::Integer(index)),
    }
}

// ---- In-place edits -------------------------------------------------------------------

fn lset(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let list = match typed::write::<ListValue>(keyspace, context, &arguments[1]) {
        Ok(Some(list)) => list,
        Ok(None) => return Frame::error(errors::NO_SUCH_KEY),
        Err(error) => return error,
    };
    let index = match args::parse_i64(&arguments[2]) {
        Ok(index) => index,
        Err(error) => return error,
    };
    let element = &arguments[3];
    // As Redis: the growth check comes first, whether or not the index exists.
    list.grow_check(element.len());
    let position = if index < 0 {
        (list.len() as i64).checked_add(index)
    } else {
        Some(index)
    };
    let replaced = position
        .and_then(|position| usize::try_from(position).ok())
        .is_some_and(|position| list.set(position, element));
    if !replaced {
        return Frame::error(INDEX_OUT_OF_RANGE);
    }
    list.shrink_check();
    keyspace.stats.dirty += 1;
    Frame::OK
}

fn linsert(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let after = if args::is_keyword(&arguments[2], "AFTER") {
        true
    } else if args::is_keyword(&arguments[2], "BEFORE") {
        false
    } else {
        return Frame::error(errors::SYNTAX);
    };
    let key = &arguments[1];
    let (pivot, element) = (&arguments[3], &arguments[4]);
    let list = match typed::write::<ListValue>(keyspace, context, key) {
        Ok(Some(list)) => list,
        Ok(None) => return Frame::Integer(0),
        Err(error) => return error,
    };
    // As Redis: the growth check comes before the pivot is searched.
    list.grow_check(element.len());
    let Some(position) = list.iter().position(|item| item == pivot.as_ref()) else {
        return Frame::Integer(-1);
    };
    list.insert(position + usize::from(after), element);
    let length = list.len();
    keyspace.stats.dirty += 1;
    keyspace.signal_ready(context.db, key);
    Frame::Integer(length as i64)
}

fn lrem(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let count = match args::parse_i64(&arguments[2]) {
        Ok(count) => count,
        Err(error) => return error,
    };
    let key = &arguments[1];
    let from = if count < 0 { End::Tail } else { End::Head };
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let (removed, emptied) = match typed::write::<ListValue>(keyspace, context, key) {
        Ok(Some(list)) => {
            let removed = list.remove_matching(&arguments[3], limit, from);
            if removed == 0 {
                return Frame::Integer(0);
            }
            (removed, settle(list))
        }
        Ok(None) => return Frame::Integer(0),
        Err(error) => return error,
    };
    finish_removal(keyspace, context, key, removed, emptied);
    Frame::Integer(removed as i64)
}

fn ltrim(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let (start, stop) = match (
        args::parse_i64(&arguments[2]),
        args::parse_i64(&arguments[3]),
    ) {
        (Ok(start), Ok(stop)) => (start, stop),
        (Err(error), _) | (_, Err(error)) => return error,
    };
    let key = &arguments[1];
    let (removed, emptied) = match typed::write::<ListValue>(keyspace, context, key) {
        Ok(Some(list)) => {
            let length = list.len();
            let (head, tail) = match resolve_range(start, stop, length) {
                Some((first, last)) => (first, length - last - 1),
                None => (length, 0),
            };
            list.trim(head, tail);
            (head + tail, settle(list))
        }
        Ok(None) => return Frame::OK,
        Err(error) => return error,
    };
    finish_removal(keyspace, context, key, removed, emptied);
    Frame::OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Harness, START_MS as NOW};
    use resp::Protocol;

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

    fn ints(items: &[i64]) -> Frame {
        Frame::Array(items.iter().map(|&item| int(item)).collect())
    }

    /// A reply as it goes on the wire in `protocol`.
    fn wire(frame: &Frame, protocol: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        resp::encode(frame, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn contents(h: &mut Harness, key: &str) -> Frame {
        h.run(&["LRANGE", key, "0", "-1"])
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const SYNTAX: &str = "ERR syntax error";
    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

    // ---- Table ---------------------------------------------------------------------

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        for (name, arity, range) in [
            ("lpush", -3, (1, 1, 1)),
            ("rpushx", -3, (1, 1, 1)),
            ("lpop", -2, (1, 1, 1)),
            ("llen", 2, (1, 1, 1)),
            ("lrange", 4, (1, 1, 1)),
            ("lindex", 3, (1, 1, 1)),
            ("lset", 4, (1, 1, 1)),
            ("linsert", 5, (1, 1, 1)),
            ("lrem", 4, (1, 1, 1)),
            ("ltrim", 4, (1, 1, 1)),
            ("lpos", -3, (1, 1, 1)),
            ("lmove", 5, (1, 2, 1)),
            ("rpoplpush", 3, (1, 2, 1)),
            ("lmpop", -4, (0, 0, 0)),
            ("blpop", -3, (1, -2, 1)),
            ("brpop", -3, (1, -2, 1)),
            ("blmove", 6, (1, 2, 1)),
            ("brpoplpush", 4, (1, 2, 1)),
            ("blmpop", -5, (0, 0, 0)),
        ] {
            assert_eq!(spec(name).arity, arity, "{name}");
            assert_eq!(spec(name).legacy_key_range(), range, "{name}");
            assert_eq!(spec(name).group, "list", "{name}");
            assert!(spec(name).categories.contains(&"list"), "{name}");
        }
        for name in ["blpop", "brpop", "blmove", "brpoplpush", "blmpop"] {
            assert!(spec(name).has(BLOCKING), "{name}");
            assert!(spec(name).categories.contains(&"blocking"), "{name}");
        }
        assert!(spec("lmpop").has_movable_keys());
        assert!(spec("blmpop").has_movable_keys());
        assert!(!spec("blpop").has_movable_keys());
        assert!(!spec("llen").is_write());
        assert!(spec("lpos").has(READONLY));
        let keys = |words: &[&str]| {
            let arguments: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            spec(words[0]).key_positions(&arguments).unwrap()
        };
        assert_eq!(keys(&["lmpop", "2", "a", "b", "LEFT"]), [2, 3]);
        assert_eq!(keys(&["blmpop", "0", "2", "a", "b", "LEFT"]), [3, 4]);
        assert_eq!(keys(&["blpop", "a", "b", "0"]), [1, 2]);
    }

    // ---- Pushes, LLEN, LRANGE, types -------------------------------------------------

    #[test]
    fn push_len_and_range() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RPUSH", "l", "a", "b", "c"]), int(3));
        assert_eq!(h.run(&["LPUSH", "l", "x", "y"]), int(5));
        assert_eq!(contents(&mut h, "l"), array(&["y", "x", "a", "b", "c"]));
        assert_eq!(h.run(&["LLEN", "l"]), int(5));
        assert_eq!(h.run(&["LLEN", "missing"]), int(0));
        assert_eq!(h.run(&["TYPE", "l"]), Frame::simple("list"));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "l"]), bulk("listpack"));
        assert_eq!(h.run(&["EXISTS", "l"]), int(1));
        assert_eq!(
            h.run(&["LPUSH", "l"]),
            error("ERR wrong number of arguments for 'lpush' command")
        );
        let binary: &[u8] = b"a\x00b\r\n";
        assert_eq!(h.run_bytes(&[b"RPUSH", b"bin", binary]), int(1));
        assert_eq!(
            h.run_bytes(&[b"LINDEX", b"bin", b"0"]),
            Frame::Bulk(Bytes::from_static(b"a\x00b\r\n"))
        );
    }

    #[test]
    fn pushx_needs_an_existing_list() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["LPUSHX", "l", "a"]), int(0));
        assert_eq!(h.run(&["RPUSHX", "l", "a", "b"]), int(0));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        h.run(&["RPUSH", "l", "m"]);
        assert_eq!(h.run(&["LPUSHX", "l", "a", "b"]), int(3));
        assert_eq!(h.run(&["RPUSHX", "l", "z"]), int(4));
        assert_eq!(contents(&mut h, "l"), array(&["b", "a", "m", "z"]));
        h.set("s", "v");
        assert_eq!(h.run(&["LPUSHX", "s", "a"]), error(WRONGTYPE));
    }

    #[test]
    fn lrange_indexes() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "0", "1", "2", "3", "4"]);
        for (start, stop, expected) in [
            ("0", "-1", &["0", "1", "2", "3", "4"][..]),
            ("1", "2", &["1", "2"]),
            ("-2", "-1", &["3", "4"]),
            ("-100", "1", &["0", "1"]),
            ("3", "100", &["3", "4"]),
            ("4", "4", &["4"]),
            ("5", "10", &[]),
            ("3", "2", &[]),
            ("-1", "-2", &[]),
            ("0", "-6", &[]),
            (
                "-9223372036854775808",
                "9223372036854775807",
                &["0", "1", "2", "3", "4"],
            ),
        ] {
            assert_eq!(
                h.run(&["LRANGE", "l", start, stop]),
                array(expected),
                "{start} {stop}"
            );
        }
        assert_eq!(h.run(&["LRANGE", "missing", "0", "-1"]), array(&[]));
        assert_eq!(h.run(&["LRANGE", "l", "x", "1"]), error(NOT_INTEGER));
        // Integers are parsed before the key is looked up.
        h.set("s", "v");
        assert_eq!(h.run(&["LRANGE", "s", "0", "y"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["LRANGE", "s", "0", "1"]), error(WRONGTYPE));
    }

    #[test]
    fn wrongtype_everywhere() {
        let mut h = Harness::new();
        h.set("s", "v");
        for words in [
            &["LPUSH", "s", "a"][..],
            &["RPUSH", "s", "a"],
            &["LPUSHX", "s", "a"],
            &["RPUSHX", "s", "a"],
            &["LPOP", "s"],
            &["RPOP", "s", "2"],
            &["LLEN", "s"],
            &["LRANGE", "s", "0", "-1"],
            &["LINDEX", "s", "0"],
            &["LSET", "s", "0", "x"],
            &["LINSERT", "s", "BEFORE", "a", "b"],
            &["LREM", "s", "0", "a"],
            &["LTRIM", "s", "0", "1"],
            &["LPOS", "s", "a"],
            &["LMOVE", "s", "d", "LEFT", "RIGHT"],
            &["RPOPLPUSH", "s", "d"],
            &["LMPOP", "1", "s", "LEFT"],
            &["BLPOP", "s", "0"],
            &["BRPOP", "s", "0"],
            &["BLMOVE", "s", "d", "LEFT", "LEFT", "0"],
            &["BRPOPLPUSH", "s", "d", "0"],
            &["BLMPOP", "0", "1", "s", "RIGHT"],
        ] {
            assert_eq!(h.run(words), error(WRONGTYPE), "{words:?}");
            assert_eq!(h.context.block, None, "{words:?}");
        }
        // And the string commands refuse lists.
        h.run(&["RPUSH", "l", "a"]);
        for words in [
            &["GET", "l"][..],
            &["APPEND", "l", "x"],
            &["INCR", "l"],
            &["STRLEN", "l"],
            &["GETDEL", "l"],
            &["SETRANGE", "l", "0", "x"],
        ] {
            assert_eq!(h.run(words), error(WRONGTYPE), "{words:?}");
        }
        assert_eq!(
            h.run(&["MGET", "l", "s"]),
            Frame::Array(vec![Frame::Null, bulk("v")])
        );
        assert_eq!(h.run(&["SET", "l", "now a string"]), Frame::OK);
        assert_eq!(h.run(&["TYPE", "l"]), Frame::simple("string"));
        assert_eq!(h.keyspace.take_ready_keys().len(), 1);
    }

    // ---- Pops ---------------------------------------------------------------------------

    #[test]
    fn pop_replies_and_null_shapes() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c", "d"]);
        assert_eq!(h.run(&["LPOP", "l"]), bulk("a"));
        assert_eq!(h.run(&["RPOP", "l"]), bulk("d"));
        assert_eq!(h.run(&["LPOP", "l", "0"]), Frame::Array(vec![]));
        assert_eq!(h.run(&["RPUSH", "l", "e", "f"]), int(4));
        assert_eq!(h.run(&["RPOP", "l", "2"]), array(&["f", "e"]));
        assert_eq!(h.run(&["LPOP", "l", "10"]), array(&["b", "c"]));
        // The emptied list is gone.
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        let missing_one = h.run(&["LPOP", "l"]);
        let missing_count = h.run(&["LPOP", "l", "2"]);
        let missing_zero = h.run(&["RPOP", "l", "0"]);
        assert_eq!(missing_one, Frame::Null);
        assert_eq!(missing_count, Frame::NullArray);
        assert_eq!(missing_zero, Frame::NullArray);
        assert_eq!(wire(&missing_one, Protocol::Resp2), "$-1\r\n");
        assert_eq!(wire(&missing_count, Protocol::Resp2), "*-1\r\n");
        assert_eq!(wire(&missing_one, Protocol::Resp3), "_\r\n");
        assert_eq!(wire(&missing_count, Protocol::Resp3), "_\r\n");
        assert_eq!(wire(&Frame::Array(vec![]), Protocol::Resp3), "*0\r\n");
    }

    #[test]
    fn pop_errors() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a"]);
        let not_positive = error("ERR value is out of range, must be positive");
        assert_eq!(h.run(&["LPOP", "l", "-1"]), not_positive);
        assert_eq!(h.run(&["RPOP", "l", "x"]), not_positive);
        assert_eq!(h.run(&["LPOP", "missing", "-1"]), not_positive);
        assert_eq!(
            h.run(&["LPOP", "l", "1", "2"]),
            error("ERR wrong number of arguments for 'lpop' command")
        );
        assert_eq!(
            h.run(&["RPOP", "l", "1", "2"]),
            error("ERR wrong number of arguments for 'rpop' command")
        );
        assert_eq!(
            h.run(&["LPOP"]),
            error("ERR wrong number of arguments for 'lpop' command")
        );
        assert_eq!(h.run(&["LLEN", "l"]), int(1));
    }

    // ---- LINDEX, LSET, LINSERT, LREM, LTRIM --------------------------------------------------

    #[test]
    fn lindex_and_lset() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c"]);
        assert_eq!(h.run(&["LINDEX", "l", "0"]), bulk("a"));
        assert_eq!(h.run(&["LINDEX", "l", "-1"]), bulk("c"));
        assert_eq!(h.run(&["LINDEX", "l", "-3"]), bulk("a"));
        assert_eq!(h.run(&["LINDEX", "l", "-4"]), Frame::Null);
        assert_eq!(h.run(&["LINDEX", "l", "3"]), Frame::Null);
        assert_eq!(h.run(&["LINDEX", "l", "x"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["LINDEX", "l", "-9223372036854775808"]), Frame::Null);
        // The key is looked up before the index is parsed.
        assert_eq!(h.run(&["LINDEX", "missing", "x"]), Frame::Null);

        assert_eq!(h.run(&["LSET", "l", "1", "B"]), Frame::OK);
        assert_eq!(h.run(&["LSET", "l", "-1", "C"]), Frame::OK);
        assert_eq!(contents(&mut h, "l"), array(&["a", "B", "C"]));
        let out_of_range = error("ERR index out of range");
        assert_eq!(h.run(&["LSET", "l", "3", "x"]), out_of_range);
        assert_eq!(h.run(&["LSET", "l", "-4", "x"]), out_of_range);
        assert_eq!(h.run(&["LSET", "l", "x", "x"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["LSET", "missing", "0", "x"]),
            error("ERR no such key")
        );
        assert_eq!(
            h.run(&["LSET", "missing", "x", "x"]),
            error("ERR no such key")
        );
    }

    #[test]
    fn linsert() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "c", "c"]);
        assert_eq!(h.run(&["LINSERT", "l", "BEFORE", "c", "b"]), int(4));
        assert_eq!(h.run(&["LINSERT", "l", "after", "c", "d"]), int(5));
        assert_eq!(h.run(&["LINSERT", "l", "BEFORE", "a", "^"]), int(6));
        assert_eq!(
            contents(&mut h, "l"),
            array(&["^", "a", "b", "c", "d", "c"])
        );
        assert_eq!(h.run(&["LINSERT", "l", "AFTER", "zz", "x"]), int(-1));
        assert_eq!(h.run(&["LINSERT", "missing", "AFTER", "a", "x"]), int(0));
        assert_eq!(h.run(&["LINSERT", "l", "NEAR", "a", "x"]), error(SYNTAX));
        // The direction is checked before the key.
        assert_eq!(
            h.run(&["LINSERT", "missing", "NEAR", "a", "x"]),
            error(SYNTAX)
        );
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
    }

    #[test]
    fn lrem() {
        let mut h = Harness::new();
        let fill = |h: &mut Harness| {
            h.run(&["DEL", "l"]);
            h.run(&["RPUSH", "l", "x", "a", "x", "b", "x", "c", "x"]);
        };
        fill(&mut h);
        assert_eq!(h.run(&["LREM", "l", "2", "x"]), int(2));
        assert_eq!(contents(&mut h, "l"), array(&["a", "b", "x", "c", "x"]));
        fill(&mut h);
        assert_eq!(h.run(&["LREM", "l", "-2", "x"]), int(2));
        assert_eq!(contents(&mut h, "l"), array(&["x", "a", "x", "b", "c"]));
        fill(&mut h);
        assert_eq!(h.run(&["LREM", "l", "0", "x"]), int(4));
        assert_eq!(contents(&mut h, "l"), array(&["a", "b", "c"]));
        assert_eq!(h.run(&["LREM", "l", "0", "nope"]), int(0));
        assert_eq!(h.run(&["LREM", "l", "-9223372036854775808", "a"]), int(1));
        assert_eq!(h.run(&["LREM", "l", "1", "b"]), int(1));
        assert_eq!(h.run(&["LREM", "l", "1", "c"]), int(1));
        assert_eq!(h.run(&["EXISTS", "l"]), int(0));
        assert_eq!(h.run(&["LREM", "l", "1", "c"]), int(0));
        assert_eq!(h.run(&["LREM", "l", "x", "c"]), error(NOT_INTEGER));
    }

    #[test]
    fn ltrim() {
        let mut h = Harness::new();
        let fill = |h: &mut Harness| {
            h.run(&["DEL", "l"]);
            h.run(&["RPUSH", "l", "0", "1", "2", "3", "4"]);
        };
        for (start, stop, expected) in [
            ("1", "-2", &["1", "2", "3"][..]),
            ("0", "0", &["0"]),
            ("-2", "100", &["3", "4"]),
            ("-100", "1", &["0", "1"]),
        ] {
            fill(&mut h);
            assert_eq!(h.run(&["LTRIM", "l", start, stop]), Frame::OK);
            assert_eq!(contents(&mut h, "l"), array(expected), "{start} {stop}");
        }
        for (start, stop) in [("3", "1"), ("5", "10"), ("0", "-6")] {
            fill(&mut h);
            assert_eq!(h.run(&["LTRIM", "l", start, stop]), Frame::OK);
            assert_eq!(h.run(&["EXISTS", "l"]), int(0), "{start} {stop}");
        }
        assert_eq!(h.run(&["LTRIM", "missing", "0", "1"]), Frame::OK);
        assert_eq!(h.run(&["LTRIM", "missing", "a", "1"]), error(NOT_INTEGER));
    }

    // ---- LPOS ---------------------------------------------------------------------------

    #[test]
    fn lpos_options() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c"]);
        assert_eq!(h.run(&["LPOS", "l", "c"]), int(2));
        assert_eq!(h.run(&["LPOS", "l", "zz"]), Frame::Null);
        assert_eq!(h.run(&["LPOS", "l", "c", "RANK", "2"]), int(6));
        assert_eq!(h.run(&["LPOS", "l", "c", "RANK", "-1"]), int(7));
        assert_eq!(h.run(&["LPOS", "l", "c", "RANK", "4"]), Frame::Null);
        assert_eq!(h.run(&["LPOS", "l", "c", "COUNT", "2"]), ints(&[2, 6]));
        assert_eq!(h.run(&["LPOS", "l", "c", "COUNT", "0"]), ints(&[2, 6, 7]));
        assert_eq!(
            h.run(&["LPOS", "l", "c", "RANK", "-1", "COUNT", "2"]),
            ints(&[7, 6])
        );
        assert_eq!(
            h.run(&["LPOS", "l", "c", "RANK", "2", "COUNT", "0"]),
            ints(&[6, 7])
        );
        assert_eq!(
            h.run(&["LPOS", "l", "c", "COUNT", "0", "MAXLEN", "3"]),
            ints(&[2])
        );
        assert_eq!(h.run(&["LPOS", "l", "c", "MAXLEN", "2"]), Frame::Null);
        assert_eq!(
            h.run(&["LPOS", "l", "a", "RANK", "-1", "MAXLEN", "3"]),
            Frame::Null
        );
        assert_eq!(h.run(&["LPOS", "l", "zz", "COUNT", "1"]), ints(&[]));
        assert_eq!(h.run(&["LPOS", "missing", "a"]), Frame::Null);
        assert_eq!(h.run(&["LPOS", "missing", "a", "COUNT", "1"]), ints(&[]));
        assert_eq!(h.run(&["LPOS", "l", "1"]), int(3));
    }

    #[test]
    fn lpos_errors() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a"]);
        assert_eq!(
            h.run(&["LPOS", "l", "a", "RANK", "0"]),
            error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
        );
        assert_eq!(
            h.run(&["LPOS", "l", "a", "RANK", "-9223372036854775808"]),
            error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(h.run(&["LPOS", "l", "a", "RANK", "x"]), error(NOT_INTEGER));
        let count_negative = error("ERR COUNT can't be negative");
        assert_eq!(h.run(&["LPOS", "l", "a", "COUNT", "-1"]), count_negative);
        assert_eq!(h.run(&["LPOS", "l", "a", "COUNT", "x"]), count_negative);
        assert_eq!(
            h.run(&["LPOS", "l", "a", "MAXLEN", "-1"]),
            error("ERR MAXLEN can't be negative")
        );
        assert_eq!(h.run(&["LPOS", "l", "a", "COUNT"]), error(SYNTAX));
        assert_eq!(h.run(&["LPOS", "l", "a", "FOO", "1"]), error(SYNTAX));
        // Options are checked before the key.
        assert_eq!(
            h.run(&["LPOS", "missing", "a", "COUNT", "-1"]),
            error("ERR COUNT can't be negative")
        );
    }

    // ---- LMOVE, RPOPLPUSH, LMPOP --------------------------------------------------------

    #[test]
    fn lmove_every_direction() {
        let mut h = Harness::new();
        for (from, to, moved, source, destination) in [
            ("LEFT", "LEFT", "a", &["b", "c"][..], &["a", "x"][..]),
            ("LEFT", "RIGHT", "a", &["b", "c"], &["x", "a"]),
            ("RIGHT", "LEFT", "c", &["a", "b"], &["c", "x"]),
            ("RIGHT", "RIGHT", "c", &["a", "b"], &["x", "c"]),
        ] {
            h.run(&["DEL", "s", "d"]);
            h.run(&["RPUSH", "s", "a", "b", "c"]);
            h.run(&["RPUSH", "d", "x"]);
            assert_eq!(h.run(&["LMOVE", "s", "d", from, to]), bulk(moved));
            assert_eq!(contents(&mut h, "s"), array(source), "{from} {to}");
            assert_eq!(contents(&mut h, "d"), array(destination), "{from} {to}");
        }
        h.run(&["DEL", "s", "d"]);
        h.run(&["RPUSH", "s", "a", "b"]);
        assert_eq!(h.run(&["RPOPLPUSH", "s", "d"]), bulk("b"));
        assert_eq!(h.run(&["RPOPLPUSH", "s", "d"]), bulk("a"));
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        assert_eq!(contents(&mut h, "d"), array(&["a", "b"]));
        assert_eq!(h.run(&["RPOPLPUSH", "s", "d"]), Frame::Null);
        assert_eq!(h.run(&["LMOVE", "s", "d", "LEFT", "LEFT"]), Frame::Null);
        assert_eq!(h.run(&["LMOVE", "s", "d", "UP", "LEFT"]), error(SYNTAX));
        assert_eq!(h.run(&["LMOVE", "s", "d", "LEFT", "DOWN"]), error(SYNTAX));
    }

    #[test]
    fn lmove_same_list_rotates() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a", "b", "c"]);
        assert_eq!(h.run(&["RPOPLPUSH", "l", "l"]), bulk("c"));
        assert_eq!(contents(&mut h, "l"), array(&["c", "a", "b"]));
        assert_eq!(h.run(&["LMOVE", "l", "l", "LEFT", "RIGHT"]), bulk("c"));
        assert_eq!(contents(&mut h, "l"), array(&["a", "b", "c"]));
        assert_eq!(h.run(&["LMOVE", "l", "l", "LEFT", "LEFT"]), bulk("a"));
        assert_eq!(contents(&mut h, "l"), array(&["a", "b", "c"]));
        h.run(&["DEL", "one"]);
        h.run(&["RPUSH", "one", "x"]);
        assert_eq!(h.run(&["RPOPLPUSH", "one", "one"]), bulk("x"));
        assert_eq!(contents(&mut h, "one"), array(&["x"]));
    }

    #[test]
    fn lmove_checks_the_destination_first() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a"]);
        h.set("s", "v");
        assert_eq!(
            h.run(&["LMOVE", "l", "s", "LEFT", "LEFT"]),
            error(WRONGTYPE)
        );
        assert_eq!(contents(&mut h, "l"), array(&["a"]));
        assert_eq!(
            h.run(&["BLMOVE", "l", "s", "LEFT", "LEFT", "0"]),
            error(WRONGTYPE)
        );
        assert_eq!(h.run(&["BRPOPLPUSH", "l", "s", "0"]), error(WRONGTYPE));
        assert_eq!(h.context.block, None);
        assert_eq!(contents(&mut h, "l"), array(&["a"]));
        // A missing source answers nil whatever the destination holds.
        assert_eq!(h.run(&["RPOPLPUSH", "missing", "s"]), Frame::Null);
    }

    #[test]
    fn lmpop() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2", "3"]);
        h.run(&["RPUSH", "c", "x"]);
        assert_eq!(
            h.run(&["LMPOP", "3", "a", "b", "c", "LEFT"]),
            Frame::Array(vec![bulk("b"), array(&["1"])])
        );
        assert_eq!(
            h.run(&["LMPOP", "2", "a", "b", "RIGHT", "COUNT", "10"]),
            Frame::Array(vec![bulk("b"), array(&["3", "2"])])
        );
        assert_eq!(h.run(&["EXISTS", "b"]), int(0));
        assert_eq!(
            h.run(&["lmpop", "2", "b", "c", "left", "count", "1"]),
            Frame::Array(vec![bulk("c"), array(&["x"])])
        );
        let nothing = h.run(&["LMPOP", "2", "b", "c", "LEFT"]);
        assert_eq!(nothing, Frame::NullArray);
        assert_eq!(wire(&nothing, Protocol::Resp2), "*-1\r\n");
        assert_eq!(wire(&nothing, Protocol::Resp3), "_\r\n");
        // A key of another type before the first list is an error.
        h.set("s", "v");
        h.run(&["RPUSH", "l", "v"]);
        assert_eq!(h.run(&["LMPOP", "2", "s", "l", "LEFT"]), error(WRONGTYPE));
        assert_eq!(
            h.run(&["LMPOP", "2", "l", "s", "LEFT"]),
            Frame::Array(vec![bulk("l"), array(&["v"])])
        );
    }

    #[test]
    fn lmpop_errors_in_redis_order() {
        let mut h = Harness::new();
        let numkeys = error("ERR numkeys should be greater than 0");
        let count = error("ERR count should be greater than 0");
        assert_eq!(h.run(&["LMPOP", "0", "a", "LEFT"]), numkeys);
        assert_eq!(h.run(&["LMPOP", "-1", "a", "LEFT"]), numkeys);
        assert_eq!(h.run(&["LMPOP", "x", "a", "LEFT"]), numkeys);
        assert_eq!(h.run(&["LMPOP", "2", "a", "LEFT"]), error(SYNTAX));
        assert_eq!(
            h.run(&["LMPOP", "9223372036854775807", "a", "LEFT"]),
            error(SYNTAX)
        );
        assert_eq!(h.run(&["LMPOP", "1", "a", "UP"]), error(SYNTAX));
        assert_eq!(h.run(&["LMPOP", "1", "a", "LEFT", "COUNT", "0"]), count);
        assert_eq!(h.run(&["LMPOP", "1", "a", "LEFT", "COUNT", "-2"]), count);
        assert_eq!(h.run(&["LMPOP", "1", "a", "LEFT", "COUNT", "x"]), count);
        assert_eq!(h.run(&["LMPOP", "1", "a", "LEFT", "COUNT"]), error(SYNTAX));
        assert_eq!(
            h.run(&["LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1"]),
            error(SYNTAX)
        );
        assert_eq!(h.run(&["LMPOP", "1", "a", "LEFT", "FOO"]), error(SYNTAX));
        assert_eq!(
            h.run(&["LMPOP", "1", "a"]),
            error("ERR wrong number of arguments for 'lmpop' command")
        );
    }

    // ---- Blocking commands ----------------------------------------------------------------

    fn blocked(h: &Harness) -> Option<(usize, Vec<String>, u64)> {
        h.context.block.as_ref().map(|block| {
            let keys = block
                .keys
                .iter()
                .map(|key| String::from_utf8_lossy(key).into_owned())
                .collect();
            (block.db, keys, block.timeout_ms)
        })
    }

    #[test]
    fn blocking_pops_serve_at_once_when_they_can() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "b", "1", "2"]);
        assert_eq!(h.run(&["BLPOP", "a", "b", "c", "0"]), array(&["b", "1"]));
        assert_eq!(blocked(&h), None);
        assert_eq!(h.run(&["BRPOP", "a", "b", "1.5"]), array(&["b", "2"]));
        assert_eq!(h.run(&["EXISTS", "b"]), int(0));
        h.run(&["RPUSH", "m", "x", "y", "z"]);
        assert_eq!(
            h.run(&["BLMPOP", "0", "2", "a", "m", "RIGHT", "COUNT", "2"]),
            Frame::Array(vec![bulk("m"), array(&["z", "y"])])
        );
        assert_eq!(
            h.run(&["BLMOVE", "m", "d", "LEFT", "RIGHT", "0"]),
            bulk("x")
        );
        assert_eq!(h.run(&["EXISTS", "m"]), int(0));
        assert_eq!(h.run(&["BRPOPLPUSH", "d", "e", "0"]), bulk("x"));
        assert_eq!(contents(&mut h, "e"), array(&["x"]));
        assert_eq!(blocked(&h), None);
    }

    #[test]
    fn blocking_pops_record_what_they_wait_for() {
        let mut h = Harness::new();
        h.context.db = 3;
        let timeout = h.run(&["BLPOP", "a", "b", "a", "0"]);
        assert_eq!(timeout, Frame::NullArray);
        assert_eq!(wire(&timeout, Protocol::Resp2), "*-1\r\n");
        assert_eq!(wire(&timeout, Protocol::Resp3), "_\r\n");
        assert_eq!(blocked(&h), Some((3, vec!["a".into(), "b".into()], 0)));
        assert_eq!(h.run(&["BRPOP", "q", "2.5"]), Frame::NullArray);
        assert_eq!(blocked(&h), Some((3, vec!["q".into()], 2500)));
        // The next command starts with no block recorded.
        h.run(&["LLEN", "q"]);
        assert_eq!(blocked(&h), None);

        let timeout = h.run(&["BLMOVE", "src", "dst", "RIGHT", "LEFT", "0.001"]);
        assert_eq!(timeout, Frame::Null);
        assert_eq!(wire(&timeout, Protocol::Resp2), "$-1\r\n");
        assert_eq!(wire(&timeout, Protocol::Resp3), "_\r\n");
        assert_eq!(blocked(&h), Some((3, vec!["src".into()], 1)));
        // The destination's type only matters once there is something to move.
        h.set("str", "v");
        assert_eq!(h.run(&["BRPOPLPUSH", "src", "str", "7"]), Frame::Null);
        assert_eq!(blocked(&h), Some((3, vec!["src".into()], 7000)));
        assert_eq!(
            h.run(&["BLMPOP", "0.25", "2", "x", "y", "LEFT"]),
            Frame::NullArray
        );
        assert_eq!(blocked(&h), Some((3, vec!["x".into(), "y".into()], 250)));
    }

    #[test]
    fn timeouts_are_read_as_redis_reads_them() {
        let mut h = Harness::new();
        for (timeout, milliseconds) in [
            ("0", 0),
            ("0.0", 0),
            ("1", 1000),
            ("0.1", 100),
            ("0.0001", 1),
            ("0.0011", 2),
            ("-0.0001", 0),
            ("1e3", 1_000_000),
            ("0x10", 16_000),
            ("2.", 2000),
            (".5", 500),
        ] {
            assert_eq!(
                h.run(&["BLPOP", "k", timeout]),
                Frame::NullArray,
                "{timeout}"
            );
            assert_eq!(
                blocked(&h).map(|block| block.2),
                Some(milliseconds),
                "{timeout}"
            );
        }
        let not_float = error("ERR timeout is not a float or out of range");
        let negative = error("ERR timeout is negative");
        let out_of_range = error("ERR timeout is out of range");
        for (timeout, expected) in [
            ("abc", &not_float),
            ("", &not_float),
            (" 1", &not_float),
            ("1 ", &not_float),
            ("nan", &not_float),
            ("1e5000", &not_float),
            ("-1", &negative),
            ("-0.002", &negative),
            ("-inf", &negative),
            ("inf", &out_of_range),
            ("9223372036854775.808", &out_of_range),
            ("36028797018963967", &out_of_range),
        ] {
            assert_eq!(&h.run(&["BLPOP", "k", timeout]), expected, "{timeout}");
            assert_eq!(blocked(&h), None, "{timeout}");
        }
        // The largest timeout that cannot overflow when added to the current time.
        let seconds =
            |milliseconds: u64| format!("{}.{:03}", milliseconds / 1000, milliseconds % 1000);
        let largest = i64::MAX as u64 - NOW;
        assert_eq!(h.run(&["BLPOP", "k", &seconds(largest)]), Frame::NullArray);
        assert_eq!(blocked(&h).map(|block| block.2), Some(largest));
        assert_eq!(h.run(&["BLPOP", "k", &seconds(largest + 1)]), out_of_range);
    }

    #[test]
    fn blocking_errors_come_first_as_in_redis() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "x"]);
        let not_float = error("ERR timeout is not a float or out of range");
        // A bad timeout fails even when there is something to pop.
        assert_eq!(h.run(&["BLPOP", "l", "x"]), not_float);
        assert_eq!(h.run(&["BLMOVE", "l", "d", "LEFT", "LEFT", "x"]), not_float);
        assert_eq!(
            h.run(&["BRPOPLPUSH", "l", "d", "-1"]),
            error("ERR timeout is negative")
        );
        assert_eq!(h.run(&["LLEN", "l"]), int(1));
        // BLMOVE checks the directions before the timeout.
        assert_eq!(
            h.run(&["BLMOVE", "l", "d", "UP", "LEFT", "x"]),
            error(SYNTAX)
        );
        // BLMPOP checks numkeys, direction and count before the timeout.
        assert_eq!(
            h.run(&["BLMPOP", "x", "0", "l", "LEFT"]),
            error("ERR numkeys should be greater than 0")
        );
        assert_eq!(h.run(&["BLMPOP", "x", "1", "l", "UP"]), error(SYNTAX));
        assert_eq!(
            h.run(&["BLMPOP", "x", "1", "l", "LEFT", "COUNT", "0"]),
            error("ERR count should be greater than 0")
        );
        assert_eq!(h.run(&["BLMPOP", "x", "1", "l", "LEFT"]), not_float);
        // A wrong type met before any list is an error, not a wait.
        h.set("s", "v");
        assert_eq!(
            h.run(&["BLPOP", "missing", "s", "l", "0"]),
            error(WRONGTYPE)
        );
        assert_eq!(blocked(&h), None);
        assert_eq!(h.run(&["LLEN", "l"]), int(1));
        assert_eq!(
            h.run(&["BLPOP"]),
            error("ERR wrong number of arguments for 'blpop' command")
        );
        assert_eq!(
            h.run(&["BLPOP", "k"]),
            error("ERR wrong number of arguments for 'blpop' command")
        );
    }

    // ---- Ready keys -------------------------------------------------------------------------

    fn ready(h: &mut Harness) -> Vec<(usize, String)> {
        h.keyspace
            .take_ready_keys()
            .into_iter()
            .map(|(db, key)| (db, String::from_utf8_lossy(&key).into_owned()))
            .collect()
    }

    #[test]
    fn additions_record_ready_keys() {
        let mut h = Harness::new();
        assert_eq!(ready(&mut h), []);
        h.run(&["RPUSH", "b", "1"]);
        h.run(&["LPUSH", "a", "1"]);
        h.run(&["RPUSH", "b", "2"]);
        h.context.db = 2;
        h.run(&["RPUSH", "b", "x"]);
        h.context.db = 0;
        assert_eq!(
            ready(&mut h),
            [(0, "b".into()), (0, "a".into()), (2, "b".into())]
        );
        assert_eq!(ready(&mut h), []);
        // Nothing added: nothing recorded.
        h.run(&["LPUSHX", "missing", "x"]);
        h.run(&["LPOP", "a"]);
        h.run(&["LINSERT", "b", "AFTER", "nope", "x"]);
        h.run(&["LSET", "b", "0", "y"]);
        h.run(&["SET", "s", "v"]);
        h.run(&["LPUSH", "s", "v"]);
        h.run(&["BLPOP", "nothing", "0"]);
        assert_eq!(ready(&mut h), []);
        h.run(&["RPUSHX", "b", "z"]);
        h.run(&["LINSERT", "b", "BEFORE", "z", "w"]);
        h.run(&["LMOVE", "b", "moved", "LEFT", "LEFT"]);
        h.run(&["RPOPLPUSH", "b", "b"]);
        assert_eq!(ready(&mut h), [(0, "b".into()), (0, "moved".into())]);
    }

    #[test]
    fn keys_that_become_lists_are_ready() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "1", "2"]);
        ready(&mut h);
        h.run(&["RENAME", "l", "renamed"]);
        h.run(&["COPY", "renamed", "copied", "DB", "4"]);
        h.run(&["MOVE", "renamed", "5"]);
        h.context.db = 4;
        let Frame::Bulk(payload) = h.run(&["DUMP", "copied"]) else {
            panic!("DUMP of a list");
        };
        h.context.db = 0;
        h.run_bytes(&[b"RESTORE", b"restored", b"0", &payload]);
        assert_eq!(
            ready(&mut h),
            [
                (0, "renamed".into()),
                (4, "copied".into()),
                (5, "renamed".into()),
                (0, "restored".into())
            ]
        );
        h.run(&["SET", "s", "v"]);
        h.run(&["RENAME", "s", "t"]);
        h.run(&["COPY", "t", "u"]);
        assert_eq!(ready(&mut h), []);
    }

    // ---- Encodings, expiry, DUMP/RESTORE, digests ------------------------------------------

    #[test]
    fn encodings_convert_as_in_redis() {
        let mut h = Harness::new();
        let big = "x".repeat(8192);
        h.run(&["RPUSH", "l", "a", "b"]);
        assert_eq!(h.encoding("l"), Some("listpack"));
        h.run(&["RPUSH", "l", &big]);
        assert_eq!(h.encoding("l"), Some("quicklist"));
        h.run(&["RPOP", "l"]);
        assert_eq!(h.encoding("l"), Some("listpack"));
        // A list created with a large element starts as a quicklist.
        h.run(&["LPUSH", "big", &big]);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "big"]), bulk("quicklist"));
        // Just under the limit: 7 bytes of listpack header plus 8185 of argument.
        h.run(&["RPUSH", "edge", &"y".repeat(8185)]);
        assert_eq!(h.encoding("edge"), Some("listpack"));
        h.run(&["DEL", "edge"]);
        h.run(&["RPUSH", "edge", &"y".repeat(8186)]);
        assert_eq!(h.encoding("edge"), Some("quicklist"));
        // Many small elements cross the 8 KB limit too.
        for _ in 0..10 {
            let words: Vec<String> = (0..100).map(|index| format!("element-{index}")).collect();
            let mut command = vec!["RPUSH", "many"];
            command.extend(words.iter().map(String::as_str));
            h.run(&command);
        }
        assert_eq!(h.encoding("many"), Some("quicklist"));
        h.run(&["LTRIM", "many", "0", "9"]);
        assert_eq!(h.encoding("many"), Some("listpack"));
        // LSET and LINSERT check growth before looking at the index or pivot.
        h.run(&["RPUSH", "small", "a"]);
        assert_eq!(
            h.run(&["LSET", "small", "5", &big]),
            error("ERR index out of range")
        );
        assert_eq!(h.encoding("small"), Some("quicklist"));
        h.run(&["RPUSH", "small2", "a"]);
        assert_eq!(h.run(&["LINSERT", "small2", "AFTER", "zz", &big]), int(-1));
        assert_eq!(h.encoding("small2"), Some("quicklist"));
        // LSET replacing the large element shrinks back.
        h.run(&["LSET", "big", "0", "tiny"]);
        assert_eq!(h.encoding("big"), Some("listpack"));
    }

    #[test]
    fn pushing_onto_an_expired_key_starts_a_new_list() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "old"]);
        h.run(&["PEXPIRE", "l", "10"]);
        assert_eq!(h.run(&["PTTL", "l"]), int(10));
        h.advance(11);
        assert_eq!(h.run(&["LPOP", "l"]), Frame::Null);
        h.run(&["RPUSH", "l", "old"]);
        h.run(&["PEXPIRE", "l", "10"]);
        h.advance(11);
        assert_eq!(h.run(&["RPUSH", "l", "new"]), int(1));
        assert_eq!(h.run(&["PTTL", "l"]), int(-1));
        // Elements added to a live list keep its TTL.
        h.run(&["PEXPIRE", "l", "1000"]);
        h.run(&["RPUSH", "l", "more"]);
        h.run(&["LPOP", "l"]);
        assert_eq!(h.expire_at("l"), Some(h.context.now_ms + 1000));
    }

    #[test]
    fn dump_restore_and_digests() {
        let mut h = Harness::new();
        let long = "z".repeat(300);
        h.run(&["RPUSH", "l", "a", "", "12", &long, "b"]);
        let Frame::Bulk(payload) = h.run(&["DUMP", "l"]) else {
            panic!("DUMP of a list");
        };
        assert_eq!(
            h.run_bytes(&[b"RESTORE", b"copy", b"0", &payload]),
            Frame::OK
        );
        assert_eq!(
            contents(&mut h, "copy"),
            array(&["a", "", "12", &long, "b"])
        );
        assert_eq!(h.encoding("copy"), Some("listpack"));
        assert_eq!(
            h.run_bytes(&[b"RESTORE", b"copy", b"0", &payload]),
            error("BUSYKEY Target key name already exists.")
        );
        let value_digest = |h: &Harness, key: &str| crate::digest::value_digest(h.entry(key));
        assert_eq!(value_digest(&h, "l"), value_digest(&h, "copy"));
        // Order matters to the digests.
        h.run(&["RPUSH", "x", "1", "2"]);
        h.run(&["RPUSH", "y", "2", "1"]);
        assert_ne!(value_digest(&h, "x"), value_digest(&h, "y"));
        let before = crate::digest::digest(&h.keyspace, NOW);
        h.run(&["LMOVE", "x", "x", "LEFT", "RIGHT"]);
        assert_ne!(crate::digest::digest(&h.keyspace, NOW), before);
        h.run(&["LMOVE", "x", "x", "LEFT", "RIGHT"]);
        assert_eq!(crate::digest::digest(&h.keyspace, NOW), before);
        // A big list comes back as a quicklist.
        let big = "q".repeat(9000);
        h.run(&["RPUSH", "big", &big]);
        let Frame::Bulk(payload) = h.run(&["DUMP", "big"]) else {
            panic!("DUMP of a list");
        };
        h.run_bytes(&[b"RESTORE", b"big2", b"0", &payload]);
        assert_eq!(h.encoding("big2"), Some("quicklist"));
    }

    #[test]
    fn debug_object_describes_lists() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "small", "a", "b"]);
        h.run(&["RPUSH", "big", &"x".repeat(9000), "y"]);
        let line = |h: &Harness, key: &str| {
            crate::digest::debug_object(&h.keyspace, h.entry(key).unwrap(), &h.context)
        };
        let small = line(&h, "small");
        // One listpack node: count, container, length prefix, 13 listpack bytes.
        assert!(
            small.contains(" encoding:listpack serializedlength:16 "),
            "{small}"
        );
        assert!(!small.contains("ql_nodes"), "{small}");
        let big = line(&h, "big");
        assert!(big.contains(" encoding:quicklist "), "{big}");
        assert!(
            big.ends_with(" ql_nodes:2 ql_avg_node:1.00 ql_listpack_max:-2 ql_compressed:0 ql_uncompressed_size:9024"),
            "{big}"
        );
    }

    #[test]
    fn dirty_counts_elements() {
        let mut h = Harness::new();
        let start = h.keyspace.stats.dirty;
        h.run(&["RPUSH", "l", "a", "b", "c"]);
        assert_eq!(h.keyspace.stats.dirty, start + 3);
        h.run(&["LPOP", "l", "2"]);
        assert_eq!(h.keyspace.stats.dirty, start + 5);
        h.run(&["LRANGE", "l", "0", "-1"]);
        h.run(&["LPOP", "missing"]);
        h.run(&["LREM", "l", "0", "nope"]);
        assert_eq!(h.keyspace.stats.dirty, start + 5);
        h.run(&["LSET", "l", "0", "x"]);
        assert_eq!(h.keyspace.stats.dirty, start + 6);
    }

    #[test]
    fn scan_filters_lists_by_type() {
        let mut h = Harness::new();
        h.run(&["RPUSH", "l", "a"]);
        h.set("s", "v");
        assert_eq!(
            h.run(&["SCAN", "0", "TYPE", "list"]),
            Frame::Array(vec![bulk("0"), array(&["l"])])
        );
        assert_eq!(
            h.run(&["SCAN", "0", "TYPE", "string"]),
            Frame::Array(vec![bulk("0"), array(&["s"])])
        );
    }
}
