//! Set commands: the Redis 7.2 set family.
//!
//! Argument checks, lookups and type checks happen in the order Redis does them,
//! so the same bad request gets the same error. A set whose last member goes is
//! deleted; the `*STORE` commands replace their destination whatever its type
//! (its TTL too) and delete it when the result is empty. Encodings convert as
//! Redis's do (see `set.rs`), results included: SINTERSTORE starts from an
//! intset or listpack and ends as an intset when every member is an integer,
//! SUNIONSTORE and SDIFFSTORE start from an intset, and SPOP taking most of a
//! set rebuilds the rest as Redis does.
//!
//! Random choices (SPOP, SRANDMEMBER) come only from the context's generator,
//! and iteration follows storage order, so every replica answers alike.

use super::hashes::{
    parse_random_count, parse_scan_options, sample_positions, scan_reply, MAX_RANDOM_PICKS,
    SCAN_COMPLEXITY,
};
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::set::{SetEncoding, SetValue};
use crate::value::{canonical_i64, Value};
use crate::{args, errors, Context, Entry, Keyspace};
use bytes::Bytes;
use resp::Frame;

const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];
const NONDETERMINISTIC_ORDER: &[&str] = &["nondeterministic_output_order"];
const INTER_COMPLEXITY: &str =
    "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.";
const ALL_ELEMENTS: &str = "O(N) where N is the total number of elements in all given sets.";

/// Every key from the first on: sets that are read.
const READ_ALL: KeySpec = KeySpec::range(1, -1, 1, RO | ACCESS);
/// A `*STORE` destination, overwritten whatever it held.
const STORE_DESTINATION: KeySpec = KeySpec::single(1, OW | UPDATE);
/// A `*STORE` command's sources: every key after the destination.
const STORE_SOURCES: KeySpec = KeySpec::range(2, -1, 1, RO | ACCESS);

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "sadd",
        arity: -3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "set", "fast"],
        group: "set",
        summary: "Adds one or more members to a set. Creates the key if it doesn't exist.",
        since: "1.0.0",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: Handler::Keyspace(sadd),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scard",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "set", "fast"],
        group: "set",
        summary: "Returns the number of members in a set.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(scard),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sdiff",
        arity: -2,
        flags: READONLY,
        key_specs: &[READ_ALL],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "set",
        summary: "Returns the difference of multiple sets.",
        since: "1.0.0",
        complexity: ALL_ELEMENTS,
        handler: Handler::Keyspace(sdiff),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sdiffstore",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[STORE_DESTINATION, STORE_SOURCES],
        categories: &["write", "set", "slow"],
        group: "set",
        summary: "Stores the difference of multiple sets in a key.",
        since: "1.0.0",
        complexity: ALL_ELEMENTS,
        handler: Handler::Keyspace(sdiffstore),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sinter",
        arity: -2,
        flags: READONLY,
        key_specs: &[READ_ALL],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "set",
        summary: "Returns the intersect of multiple sets.",
        since: "1.0.0",
        complexity: INTER_COMPLEXITY,
        handler: Handler::Keyspace(sinter),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sintercard",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::counted(1, RO | ACCESS)],
        categories: &["read", "set", "slow"],
        group: "set",
        summary: "Returns the number of members of the intersect of multiple sets.",
        since: "7.0.0",
        complexity: INTER_COMPLEXITY,
        handler: Handler::Keyspace(sintercard),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sinterstore",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[STORE_DESTINATION, STORE_SOURCES],
        categories: &["write", "set", "slow"],
        group: "set",
        summary: "Stores the intersect of multiple sets in a key.",
        since: "1.0.0",
        complexity: INTER_COMPLEXITY,
        handler: Handler::Keyspace(sinterstore),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sismember",
        arity: 3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "set", "fast"],
        group: "set",
        summary: "Determines whether a member belongs to a set.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(sismember),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smembers",
        arity: 2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "set",
        summary: "Returns all members of a set.",
        since: "1.0.0",
        complexity: "O(N) where N is the set cardinality.",
        handler: Handler::Keyspace(smembers),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smismember",
        arity: -3,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "set", "fast"],
        group: "set",
        summary: "Determines whether multiple members belong to a set.",
        since: "6.2.0",
        complexity: "O(N) where N is the number of elements being checked for membership",
        handler: Handler::Keyspace(smismember),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "smove",
        arity: 4,
        flags: WRITE | FAST,
        key_specs: &[
            KeySpec::single(1, RW | ACCESS | DELETE),
            KeySpec::single(2, RW | INSERT),
        ],
        categories: &["write", "set", "fast"],
        group: "set",
        summary: "Moves a member from one set to another.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(smove),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "spop",
        arity: -2,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | DELETE)],
        categories: &["write", "set", "fast"],
        tips: NONDETERMINISTIC,
        group: "set",
        summary: "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.",
        since: "1.0.0",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        handler: Handler::Keyspace(spop),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srandmember",
        arity: -2,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC,
        group: "set",
        summary: "Get one or multiple random members from a set",
        since: "1.0.0",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        handler: Handler::Keyspace(srandmember),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "srem",
        arity: -3,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | DELETE)],
        categories: &["write", "set", "fast"],
        group: "set",
        summary: "Removes one or more members from a set. Deletes the set if the last member was removed.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of members to be removed.",
        handler: Handler::Keyspace(srem),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sscan",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC,
        group: "set",
        summary: "Iterates over members of a set.",
        since: "2.8.0",
        complexity: SCAN_COMPLEXITY,
        handler: Handler::Keyspace(sscan),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sunion",
        arity: -2,
        flags: READONLY,
        key_specs: &[READ_ALL],
        categories: &["read", "set", "slow"],
        tips: NONDETERMINISTIC_ORDER,
        group: "set",
        summary: "Returns the union of multiple sets.",
        since: "1.0.0",
        complexity: ALL_ELEMENTS,
        handler: Handler::Keyspace(sunion),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sunionstore",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[STORE_DESTINATION, STORE_SOURCES],
        categories: &["write", "set", "slow"],
        group: "set",
        summary: "Stores the union of multiple sets in a key.",
        since: "1.0.0",
        complexity: ALL_ELEMENTS,
        handler: Handler::Keyspace(sunionstore),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";
const TOO_MANY_KEYS: &str = "ERR Number of keys can't be greater than number of args";
const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";

/// SPOP rebuilds the set from the members it keeps when it takes at least this
/// many times as many as it leaves (Redis's SPOP_MOVE_STRATEGY_MUL).
const SPOP_REBUILD_FACTOR: usize = 5;

// ---- Shared helpers ---------------------------------------------------------------

fn set_mut(value: &mut Value) -> Result<&mut SetValue, Frame> {
    match value {
        Value::Set(set) => Ok(set),
        _ => Err(Frame::error(errors::WRONGTYPE)),
    }
}

/// The set at `key` for a read command (`lookupKeyRead`).
fn read_set<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut SetValue>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => set_mut(&mut entry.value).map(Some),
    }
}

/// The set at `key` for a write command (`lookupKeyWrite`).
fn write_set<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut SetValue>, Frame> {
    match keyspace.lookup_write(context, key) {
        None => Ok(None),
        Some(entry) => set_mut(&mut entry.value).map(Some),
    }
}

/// Stores a new set at `key` (absent: the caller looked it up for writing).
fn create_set(keyspace: &mut Keyspace, context: &Context, key: &[u8], set: SetValue) {
    debug_assert!(!set.is_empty());
    let access = keyspace.initial_access(context);
    keyspace
        .db(context.db)
        .set(key, Value::Set(set), None, access);
}

/// Looks every key up as a read (hits, misses, lazy expiry), failing with
/// WRONGTYPE when one holds another type, then hands out the sets (None for
/// absent keys), in the keys' order.
fn read_sets<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
) -> Result<Vec<Option<&'a SetValue>>, Frame> {
    for key in keys {
        if let Some(entry) = keyspace.read(context, key) {
            if !matches!(entry.value, Value::Set(_)) {
                return Err(Frame::error(errors::WRONGTYPE));
            }
        }
    }
    let keyspace: &'a Keyspace = keyspace;
    let db = keyspace.db_ref(context.db);
    Ok(keys
        .iter()
        .map(|key| match db.peek(key, context.now_ms) {
            Some(Entry {
                value: Value::Set(set),
                ..
            }) => Some(set),
            _ => None,
        })
        .collect())
}

fn bulk(data: &[u8]) -> Frame {
    Frame::bulk_from_slice(data)
}

fn set_reply(set: &SetValue) -> Frame {
    Frame::Set(set.members().map(|member| bulk(&member)).collect())
}

/// Stores a `*STORE` result at `destination`, replacing whatever was there,
/// or deletes the destination when the result is empty; answers the size.
fn store_result(
    keyspace: &mut Keyspace,
    context: &mut Context,
    destination: &[u8],
    result: SetValue,
) -> Frame {
    let size = result.len();
    if size == 0 {
        keyspace.delete(context, destination);
        return Frame::Integer(0);
    }
    keyspace.set(context, destination, Value::Set(result), None);
    Frame::Integer(size as i64)
}

// ---- SADD, SREM, SMOVE ------------------------------------------------------------

fn sadd(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let members = &arguments[2..];
    let add_all = |set: &mut SetValue| members.iter().filter(|member| set.add(member)).count();
    let added = match write_set(keyspace, context, key) {
        Err(error) => return error,
        Ok(Some(set)) => {
            set.prepare_for(members.len());
            add_all(set)
        }
        Ok(None) => {
            let mut set = SetValue::create(&members[0], members.len());
            let added = add_all(&mut set);
            create_set(keyspace, context, key, set);
            added
        }
    };
    keyspace.stats.dirty += added as u64;
    Frame::Integer(added as i64)
}

fn srem(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let (deleted, emptied) = match write_set(keyspace, context, key) {
        Err(error) => return error,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(set)) => {
            let mut deleted = 0;
            for member in &arguments[2..] {
                if set.remove(member) {
                    deleted += 1;
                    if set.is_empty() {
                        break;
                    }
                }
            }
            (deleted, set.is_empty())
        }
    };
    if emptied {
        keyspace.db(context.db).remove(key);
    }
    keyspace.stats.dirty += deleted;
    Frame::Integer(deleted as i64)
}

fn smove(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let (source, destination, member) = (&arguments[1], &arguments[2], &arguments[3]);
    // Both keys are looked up first (expiring them), as Redis does.
    let is_set = |entry: &mut Entry| matches!(entry.value, Value::Set(_));
    let source_kind = keyspace.lookup_write(context, source).map(is_set);
    let destination_kind = keyspace.lookup_write(context, destination).map(is_set);
    match (source_kind, destination_kind) {
        (None, _) => return Frame::Integer(0),
        (Some(false), _) | (_, Some(false)) => return Frame::error(errors::WRONGTYPE),
        _ => {}
    }
    if source == destination {
        return match write_set(keyspace, context, source) {
            Ok(Some(set)) => Frame::Integer(set.contains(member) as i64),
            Ok(None) => Frame::Integer(0),
            Err(error) => error,
        };
    }
    let emptied = match write_set(keyspace, context, source) {
        Ok(Some(set)) => {
            if !set.remove(member) {
                return Frame::Integer(0);
            }
            set.is_empty()
        }
        Ok(None) => return Frame::Integer(0),
        Err(error) => return error,
    };
    if emptied {
        keyspace.db(context.db).remove(source);
    }
    keyspace.stats.dirty += 1;
    let added = match write_set(keyspace, context, destination) {
        Ok(Some(set)) => set.add(member),
        Ok(None) => {
            let mut set = SetValue::create(member, 1);
            set.add(member);
            create_set(keyspace, context, destination, set);
            true
        }
        Err(error) => return error,
    };
    if added {
        keyspace.stats.dirty += 1;
    }
    Frame::Integer(1)
}

// ---- Single-set reads ------------------------------------------------------------

fn sismember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => Frame::Integer(set.contains(&arguments[2]) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn smismember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let members = &arguments[2..];
    match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => Frame::Array(
            members
                .iter()
                .map(|member| Frame::Integer(set.contains(member) as i64))
                .collect(),
        ),
        Ok(None) => Frame::Array(vec![Frame::Integer(0); members.len()]),
        Err(error) => error,
    }
}

fn scard(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => Frame::Integer(set.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn smembers(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => set_reply(set),
        Ok(None) => Frame::Set(Vec::new()),
        Err(error) => error,
    }
}

fn sscan(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = super::keys::parse_cursor(&arguments[2]) else {
        return Frame::error(errors::CURSOR_INVALID);
    };
    let set = match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => set,
        Ok(None) => return scan_reply(0, Vec::new()),
        Err(error) => return error,
    };
    let options = match parse_scan_options(&arguments[3..]) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let mut items = Vec::new();
    let next = set.scan(cursor, options.count, |member| {
        if options
            .pattern
            .is_none_or(|pattern| glob_match(pattern, member, false))
        {
            items.push(bulk(member));
        }
    });
    scan_reply(next, items)
}

// ---- Random members --------------------------------------------------------------

fn spop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if arguments.len() > 3 {
        return Frame::error(errors::SYNTAX);
    }
    if arguments.len() == 3 {
        return spop_with_count(keyspace, context, arguments);
    }
    let key = &arguments[1];
    let (member, emptied) = match write_set(keyspace, context, key) {
        Ok(Some(set)) => {
            let position = context.rng.below(set.len() as u64) as usize;
            let member = set.remove_at(position);
            (member, set.is_empty())
        }
        Ok(None) => return Frame::Null,
        Err(error) => return error,
    };
    if emptied {
        keyspace.db(context.db).remove(key);
    }
    keyspace.stats.dirty += 1;
    Frame::Bulk(Bytes::from(member))
}

fn spop_with_count(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let count = match args::parse_i64(&arguments[2]) {
        Ok(count) if count < 0 => return Frame::error(NOT_POSITIVE),
        Ok(count) => usize::try_from(count).unwrap_or(usize::MAX),
        Err(error) => return error,
    };
    let key = &arguments[1];
    let set = match write_set(keyspace, context, key) {
        Ok(Some(set)) => set,
        Ok(None) => return Frame::Set(Vec::new()),
        Err(error) => return error,
    };
    if count == 0 {
        return Frame::Set(Vec::new());
    }
    let size = set.len();
    if count >= size {
        // As Redis: the whole set, answered as the union of that one set.
        let mut union = SetValue::empty_intset();
        for member in set.members() {
            union.add(&member);
        }
        let reply = set_reply(&union);
        keyspace.db(context.db).remove(key);
        keyspace.stats.dirty += size as u64;
        return reply;
    }
    let remaining = size - count;
    let popped = if remaining.saturating_mul(SPOP_REBUILD_FACTOR) > count {
        // Few taken: remove them where they are (highest position first, so a
        // hashtable's moves never touch a position still to be taken).
        let positions = sample_positions(&mut context.rng, size, count);
        let mut popped: Vec<Frame> = positions
            .iter()
            .rev()
            .map(|&position| Frame::Bulk(Bytes::from(set.remove_at(position))))
            .collect();
        popped.reverse();
        popped
    } else {
        // Most taken: keep a random few in a new set, as Redis does (an intset
        // stays one; other sets start again from a listpack).
        let kept = sample_positions(&mut context.rng, size, remaining);
        let mut rebuilt = match set.encoding() {
            SetEncoding::Intset => SetValue::empty_intset(),
            SetEncoding::Listpack | SetEncoding::Table => SetValue::empty_listpack(),
        };
        let mut popped = Vec::with_capacity(count);
        let mut kept_positions = kept.iter().peekable();
        for (position, member) in set.members().enumerate() {
            if kept_positions.next_if_eq(&&position).is_some() {
                rebuilt.add(&member);
            } else {
                popped.push(bulk(&member));
            }
        }
        *set = rebuilt;
        popped
    };
    keyspace.stats.dirty += count as u64;
    Frame::Set(popped)
}

fn srandmember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if arguments.len() > 3 {
        return Frame::error(errors::SYNTAX);
    }
    let Some(count_argument) = arguments.get(2) else {
        return match read_set(keyspace, context, &arguments[1]) {
            Ok(Some(set)) => {
                let position = context.rng.below(set.len() as u64) as usize;
                bulk(&set.member(position))
            }
            Ok(None) => Frame::Null,
            Err(error) => error,
        };
    };
    let count = match parse_random_count(count_argument) {
        Ok(count) => count,
        Err(error) => return error,
    };
    let set = match read_set(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => set,
        Ok(None) => return Frame::Array(Vec::new()),
        Err(error) => return error,
    };
    let rng = &mut context.rng;
    let size = set.len();
    if count < 0 || count == 1 {
        let picks = count.unsigned_abs().min(MAX_RANDOM_PICKS);
        return Frame::Array(
            (0..picks)
                .map(|_| bulk(&set.member(rng.below(size as u64) as usize)))
                .collect(),
        );
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= size {
        return Frame::Array(set.members().map(|member| bulk(&member)).collect());
    }
    Frame::Array(
        sample_positions(rng, size, count)
            .into_iter()
            .map(|position| bulk(&set.member(position)))
            .collect(),
    )
}

// ---- Intersection ------------------------------------------------------------------

/// What an intersection produces.
enum InterOutput {
    Reply,
    Cardinality { limit: usize },
    Store,
}

/// SINTER, SINTERCARD and SINTERSTORE: the members of the smallest set found in
/// every other, in that set's order.
fn sinter_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
    output: InterOutput,
    destination: Option<&[u8]>,
) -> Frame {
    let sets = match read_sets(keyspace, context, keys) {
        Ok(sets) => sets,
        Err(error) => return error,
    };
    let Some(mut sets) = sets.into_iter().collect::<Option<Vec<&SetValue>>>() else {
        // Any absent key makes the intersection empty.
        return match output {
            InterOutput::Reply => Frame::Set(Vec::new()),
            InterOutput::Cardinality { .. } => Frame::Integer(0),
            InterOutput::Store => {
                let destination = destination.expect("store has a destination");
                keyspace.delete(context, destination);
                Frame::Integer(0)
            }
        };
    };
    sets.sort_by_key(|set| set.len());
    let (smallest, others) = sets.split_first().expect("at least one key");
    let in_all = |member: &[u8]| {
        others
            .iter()
            .all(|other| std::ptr::eq(*other, *smallest) || other.contains(member))
    };
    match output {
        InterOutput::Reply => Frame::Set(
            smallest
                .members()
                .filter(|member| in_all(member))
                .map(|member| bulk(&member))
                .collect(),
        ),
        InterOutput::Cardinality { limit } => {
            let mut cardinality = 0usize;
            for member in smallest.members() {
                if in_all(&member) {
                    cardinality += 1;
                    if limit != 0 && cardinality >= limit {
                        break;
                    }
                }
            }
            Frame::Integer(cardinality as i64)
        }
        InterOutput::Store => {
            let mut result = match smallest.encoding() {
                SetEncoding::Intset => SetValue::empty_intset(),
                SetEncoding::Listpack | SetEncoding::Table => SetValue::empty_listpack(),
            };
            let mut only_integers = true;
            for member in smallest.members() {
                if in_all(&member) {
                    only_integers &= canonical_i64(&member).is_some();
                    result.add(&member);
                }
            }
            if only_integers {
                result.convert_to_intset_if_integers();
            }
            let destination = destination.expect("store has a destination");
            store_result(keyspace, context, destination, result)
        }
    }
}

fn sinter(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sinter_generic(keyspace, context, &arguments[1..], InterOutput::Reply, None)
}

fn sinterstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sinter_generic(
        keyspace,
        context,
        &arguments[2..],
        InterOutput::Store,
        Some(&arguments[1]),
    )
}

fn sintercard(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let numkeys = match canonical_i64(&arguments[1]) {
        Some(numkeys) if numkeys >= 1 => usize::try_from(numkeys).unwrap_or(usize::MAX),
        _ => return Frame::error(NUMKEYS_NOT_POSITIVE),
    };
    if numkeys > arguments.len() - 2 {
        return Frame::error(TOO_MANY_KEYS);
    }
    let mut limit = 0usize;
    let mut index = 2 + numkeys;
    while index < arguments.len() {
        let has_value = index + 1 < arguments.len();
        if args::is_keyword(&arguments[index], "LIMIT") && has_value {
            limit = match canonical_i64(&arguments[index + 1]) {
                Some(value) if value >= 0 => usize::try_from(value).unwrap_or(usize::MAX),
                _ => return Frame::error(LIMIT_NEGATIVE),
            };
            index += 2;
        } else {
            return Frame::error(errors::SYNTAX);
        }
    }
    sinter_generic(
        keyspace,
        context,
        &arguments[2..2 + numkeys],
        InterOutput::Cardinality { limit },
        None,
    )
}

// ---- Union and difference ------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operation {
    Union,
    Difference,
}

/// SUNION, SDIFF and their STORE forms. The result is built as Redis builds
/// it: an intset that converts as members arrive.
fn sunion_diff_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
    operation: Operation,
    destination: Option<&[u8]>,
) -> Frame {
    let sets = match read_sets(keyspace, context, keys) {
        Ok(sets) => sets,
        Err(error) => return error,
    };
    let mut result = SetValue::empty_intset();
    match operation {
        Operation::Union => {
            for set in sets.iter().flatten() {
                for member in set.members() {
                    result.add(&member);
                }
            }
        }
        Operation::Difference => {
            if let Some(first) = sets[0] {
                let others = &sets[1..];
                let same_set = others
                    .iter()
                    .flatten()
                    .any(|other| std::ptr::eq(*other, first));
                if !same_set {
                    for member in first.members() {
                        if !others.iter().flatten().any(|other| other.contains(&member)) {
                            result.add(&member);
                        }
                    }
                }
            }
        }
    }
    match destination {
        None => set_reply(&result),
        Some(destination) => store_result(keyspace, context, destination, result),
    }
}

fn sunion(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sunion_diff_generic(keyspace, context, &arguments[1..], Operation::Union, None)
}

fn sunionstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sunion_diff_generic(
        keyspace,
        context,
        &arguments[2..],
        Operation::Union,
        Some(&arguments[1]),
    )
}

fn sdiff(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sunion_diff_generic(
        keyspace,
        context,
        &arguments[1..],
        Operation::Difference,
        None,
    )
}

fn sdiffstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    sunion_diff_generic(
        keyspace,
        context,
        &arguments[2..],
        Operation::Difference,
        Some(&arguments[1]),
    )
}
