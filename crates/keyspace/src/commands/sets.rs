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
use super::typed;
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
    let added = match typed::write::<SetValue>(keyspace, context, key) {
        Err(error) => return error,
        Ok(Some(set)) => {
            set.prepare_for(members.len());
            add_all(set)
        }
        Ok(None) => {
            let mut set = SetValue::create(&members[0], members.len());
            let added = add_all(&mut set);
            typed::create(keyspace, context, key, set);
            added
        }
    };
    keyspace.stats.dirty += added as u64;
    Frame::Integer(added as i64)
}

fn srem(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let (deleted, emptied) = match typed::write::<SetValue>(keyspace, context, key) {
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
        return match typed::write::<SetValue>(keyspace, context, source) {
            Ok(Some(set)) => Frame::Integer(set.contains(member) as i64),
            Ok(None) => Frame::Integer(0),
            Err(error) => error,
        };
    }
    let emptied = match typed::write::<SetValue>(keyspace, context, source) {
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
    let added = match typed::write::<SetValue>(keyspace, context, destination) {
        Ok(Some(set)) => set.add(member),
        Ok(None) => {
            let mut set = SetValue::create(member, 1);
            set.add(member);
            typed::create(keyspace, context, destination, set);
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
    match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => Frame::Integer(set.contains(&arguments[2]) as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn smismember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let members = &arguments[2..];
    match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
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
    match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => Frame::Integer(set.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn smembers(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
        Ok(Some(set)) => set_reply(set),
        Ok(None) => Frame::Set(Vec::new()),
        Err(error) => error,
    }
}

fn sscan(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = super::keys::parse_cursor(&arguments[2]) else {
        return Frame::error(errors::CURSOR_INVALID);
    };
    let set = match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
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
    let (member, emptied) = match typed::write::<SetValue>(keyspace, context, key) {
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
    let set = match typed::write::<SetValue>(keyspace, context, key) {
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
        return match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
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
    let set = match typed::read::<SetValue>(keyspace, context, &arguments[1]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Harness, START_MS as NOW};
    use resp::Protocol;
    use std::collections::BTreeSet;

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

    fn set(items: &[&str]) -> Frame {
        Frame::Set(items.iter().map(|item| bulk(item)).collect())
    }

    fn wire(frame: &Frame, protocol: Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        resp::encode(frame, protocol, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The members of a reply, sorted (for replies whose order is the set's).
    fn sorted(frame: Frame) -> Vec<String> {
        let items = match frame {
            Frame::Set(items) | Frame::Array(items) => items,
            other => panic!("not a collection: {other:?}"),
        };
        let mut members: Vec<String> = items
            .iter()
            .map(|item| String::from_utf8_lossy(item.as_bytes().unwrap()).into_owned())
            .collect();
        members.sort();
        members
    }

    fn run_owned(h: &mut Harness, words: &[String]) -> Frame {
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        h.run(&refs)
    }

    /// `SADD key` with members `prefix0..prefix{count-1}`.
    fn sadd_many(h: &mut Harness, key: &str, prefix: &str, count: usize) -> Frame {
        let mut words = vec!["SADD".to_string(), key.to_string()];
        words.extend((0..count).map(|index| format!("{prefix}{index}")));
        run_owned(h, &words)
    }

    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    const SYNTAX: &str = "ERR syntax error";
    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        for (name, arity, write, range) in [
            ("sadd", -3, true, (1, 1, 1)),
            ("srem", -3, true, (1, 1, 1)),
            ("smembers", 2, false, (1, 1, 1)),
            ("sismember", 3, false, (1, 1, 1)),
            ("smismember", -3, false, (1, 1, 1)),
            ("scard", 2, false, (1, 1, 1)),
            ("spop", -2, true, (1, 1, 1)),
            ("srandmember", -2, false, (1, 1, 1)),
            ("smove", 4, true, (1, 2, 1)),
            ("sinter", -2, false, (1, -1, 1)),
            ("sintercard", -3, false, (0, 0, 0)),
            ("sinterstore", -3, true, (1, -1, 1)),
            ("sunion", -2, false, (1, -1, 1)),
            ("sunionstore", -3, true, (1, -1, 1)),
            ("sdiff", -2, false, (1, -1, 1)),
            ("sdiffstore", -3, true, (1, -1, 1)),
            ("sscan", -3, false, (1, 1, 1)),
        ] {
            let spec = spec(name);
            assert_eq!(spec.arity, arity, "{name}");
            assert_eq!(spec.is_write(), write, "{name}");
            assert_eq!(spec.legacy_key_range(), range, "{name}");
            assert_eq!(spec.group, "set", "{name}");
            assert!(spec.categories.contains(&"set"), "{name}");
        }
        assert!(spec("sintercard").has_movable_keys());
        assert_eq!(spec("sintercard").since, "7.0.0");
        assert_eq!(spec("smismember").since, "6.2.0");
        assert!(spec("sinterstore").has(DENYOOM));
        assert!(!spec("sinterstore").has(FAST));
        assert_eq!(spec("sinterstore").key_specs[0].flags, OW | UPDATE);
        let keys = |words: &[&str]| {
            let arguments: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
            spec(words[0]).key_positions(&arguments).unwrap()
        };
        assert_eq!(keys(&["sintercard", "2", "a", "b", "LIMIT", "1"]), [2, 3]);
        assert_eq!(keys(&["sunionstore", "d", "a", "b"]), [1, 2, 3]);
        assert_eq!(keys(&["smove", "a", "b", "m"]), [1, 2]);
    }

    #[test]
    fn add_remove_and_membership() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SADD", "s", "a", "b", "a"]), int(2));
        assert_eq!(h.run(&["SADD", "s", "b", "c"]), int(1));
        assert_eq!(h.run(&["SCARD", "s"]), int(3));
        assert_eq!(h.run(&["SCARD", "missing"]), int(0));
        assert_eq!(h.run(&["SISMEMBER", "s", "a"]), int(1));
        assert_eq!(h.run(&["SISMEMBER", "s", "z"]), int(0));
        assert_eq!(h.run(&["SISMEMBER", "missing", "a"]), int(0));
        assert_eq!(
            h.run(&["SMISMEMBER", "s", "a", "z", "c"]),
            Frame::Array(vec![int(1), int(0), int(1)])
        );
        assert_eq!(
            h.run(&["SMISMEMBER", "missing", "a", "b"]),
            Frame::Array(vec![int(0), int(0)])
        );
        // A listpack answers in insertion order.
        assert_eq!(h.run(&["SMEMBERS", "s"]), set(&["a", "b", "c"]));
        assert_eq!(h.run(&["SMEMBERS", "missing"]), set(&[]));
        assert_eq!(h.run(&["TYPE", "s"]), Frame::simple("set"));
        assert_eq!(h.run(&["SREM", "s", "a", "z", "a"]), int(1));
        assert_eq!(h.run(&["SMEMBERS", "s"]), set(&["b", "c"]));
        assert_eq!(h.run(&["SREM", "missing", "a"]), int(0));
        assert_eq!(h.run(&["SREM", "s", "b", "c", "d"]), int(2));
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));
        // Integers are kept sorted in an intset.
        assert_eq!(h.run(&["SADD", "n", "5", "-1", "10", "3"]), int(4));
        assert_eq!(h.encoding("n"), Some("intset"));
        assert_eq!(h.run(&["SMEMBERS", "n"]), set(&["-1", "3", "5", "10"]));
        assert_eq!(h.run(&["SISMEMBER", "n", "05"]), int(0));
        assert_eq!(h.run(&["SADD", "n", "05"]), int(1));
        assert_eq!(h.encoding("n"), Some("listpack"));
        assert_eq!(
            h.run(&["SMEMBERS", "n"]),
            set(&["-1", "3", "5", "10", "05"])
        );
    }

    #[test]
    fn reply_shapes_in_both_protocols() {
        let mut h = Harness::new();
        h.run(&["SADD", "s", "a", "b"]);
        let members = h.run(&["SMEMBERS", "s"]);
        assert_eq!(
            wire(&members, Protocol::Resp2),
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(
            wire(&members, Protocol::Resp3),
            "~2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        let empty = h.run(&["SINTER", "s", "missing"]);
        assert_eq!(wire(&empty, Protocol::Resp2), "*0\r\n");
        assert_eq!(wire(&empty, Protocol::Resp3), "~0\r\n");
        let popped = h.run(&["SPOP", "missing", "2"]);
        assert_eq!(wire(&popped, Protocol::Resp3), "~0\r\n");
        let random = h.run(&["SRANDMEMBER", "missing", "2"]);
        assert_eq!(wire(&random, Protocol::Resp3), "*0\r\n");
        let none = h.run(&["SPOP", "missing"]);
        assert_eq!(wire(&none, Protocol::Resp2), "$-1\r\n");
        assert_eq!(wire(&none, Protocol::Resp3), "_\r\n");
        let none = h.run(&["SRANDMEMBER", "missing"]);
        assert_eq!(wire(&none, Protocol::Resp3), "_\r\n");
        let flags = h.run(&["SMISMEMBER", "s", "a"]);
        assert_eq!(wire(&flags, Protocol::Resp3), "*1\r\n:1\r\n");
    }

    #[test]
    fn wrongtype_everywhere() {
        let mut h = Harness::new();
        h.set("str", "v");
        h.run(&["SADD", "s", "a"]);
        for words in [
            &["SADD", "str", "a"][..],
            &["SREM", "str", "a"],
            &["SMEMBERS", "str"],
            &["SISMEMBER", "str", "a"],
            &["SMISMEMBER", "str", "a"],
            &["SCARD", "str"],
            &["SPOP", "str"],
            &["SPOP", "str", "2"],
            &["SRANDMEMBER", "str"],
            &["SRANDMEMBER", "str", "2"],
            &["SMOVE", "str", "s", "a"],
            &["SMOVE", "s", "str", "a"],
            &["SINTER", "s", "str"],
            &["SINTER", "missing", "str"],
            &["SINTERCARD", "2", "s", "str"],
            &["SINTERSTORE", "d", "s", "str"],
            &["SUNION", "s", "str"],
            &["SUNIONSTORE", "d", "str"],
            &["SDIFF", "s", "str"],
            &["SDIFF", "missing", "str"],
            &["SDIFFSTORE", "d", "s", "str"],
            &["SSCAN", "str", "0"],
            &["HGET", "s", "a"],
            &["LPUSH", "s", "a"],
            &["GET", "s"],
        ] {
            assert_eq!(h.run(words), error(WRONGTYPE), "{words:?}");
        }
        // Nothing was stored by the failed STORE commands.
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        assert_eq!(h.run(&["SMEMBERS", "s"]), set(&["a"]));
        // SMOVE from a missing source answers 0 before any type check.
        assert_eq!(h.run(&["SMOVE", "missing", "str", "a"]), int(0));
    }

    #[test]
    fn encodings_convert_as_in_redis() {
        let mut h = Harness::new();
        sadd_many(&mut h, "ints", "", 512);
        assert_eq!(h.encoding("ints"), Some("intset"));
        h.run(&["SADD", "ints", "512"]);
        assert_eq!(h.encoding("ints"), Some("hashtable"));
        // A string joining a small intset makes a listpack, in intset order.
        h.run(&["SADD", "mixed", "3", "1", "2"]);
        h.run(&["SADD", "mixed", "x"]);
        assert_eq!(h.encoding("mixed"), Some("listpack"));
        assert_eq!(h.run(&["SMEMBERS", "mixed"]), set(&["1", "2", "3", "x"]));
        // ... but a hashtable when the intset is too big for a listpack.
        sadd_many(&mut h, "wide", "", 128);
        h.run(&["SADD", "wide", "x"]);
        assert_eq!(h.encoding("wide"), Some("hashtable"));
        sadd_many(&mut h, "strings", "m", 128);
        assert_eq!(h.encoding("strings"), Some("listpack"));
        h.run(&["SADD", "strings", "another"]);
        assert_eq!(h.encoding("strings"), Some("hashtable"));
        h.run(&["SADD", "long", "a"]);
        h.run(&["SADD", "long", &"x".repeat(65)]);
        assert_eq!(h.encoding("long"), Some("hashtable"));
        // Size hints: a new set with too many arguments starts as a hashtable,
        // even if they repeat.
        let mut words = vec!["SADD".to_string(), "hinted".to_string()];
        words.extend(std::iter::repeat_n("same".to_string(), 129));
        assert_eq!(run_owned(&mut h, &words), int(1));
        assert_eq!(h.encoding("hinted"), Some("hashtable"));
        let mut words = vec!["SADD".to_string(), "hinted-int".to_string()];
        words.extend(std::iter::repeat_n("1".to_string(), 513));
        run_owned(&mut h, &words);
        assert_eq!(h.encoding("hinted-int"), Some("hashtable"));
        h.run(&["SADD", "existing", "a"]);
        let mut words = vec!["SADD".to_string(), "existing".to_string()];
        words.extend(std::iter::repeat_n("a".to_string(), 129));
        assert_eq!(run_owned(&mut h, &words), int(0));
        assert_eq!(h.encoding("existing"), Some("hashtable"));
        // Never back by removal.
        for index in 0..500 {
            h.run(&["SREM", "ints", &index.to_string()]);
        }
        assert_eq!(h.encoding("ints"), Some("hashtable"));
    }

    #[test]
    fn smove() {
        let mut h = Harness::new();
        h.run(&["SADD", "a", "x", "y"]);
        h.run(&["SADD", "b", "z"]);
        assert_eq!(h.run(&["SMOVE", "a", "b", "x"]), int(1));
        assert_eq!(h.run(&["SMEMBERS", "a"]), set(&["y"]));
        assert_eq!(h.run(&["SMEMBERS", "b"]), set(&["z", "x"]));
        assert_eq!(h.run(&["SMOVE", "a", "b", "nope"]), int(0));
        // Already in the destination: removed from the source only.
        h.run(&["SADD", "a", "z"]);
        assert_eq!(h.run(&["SMOVE", "a", "b", "z"]), int(1));
        assert_eq!(h.run(&["SMEMBERS", "b"]), set(&["z", "x"]));
        // Same key: membership only.
        assert_eq!(h.run(&["SMOVE", "b", "b", "z"]), int(1));
        assert_eq!(h.run(&["SMOVE", "b", "b", "q"]), int(0));
        // The emptied source goes; a missing destination is created.
        assert_eq!(h.run(&["SMOVE", "a", "new", "y"]), int(1));
        assert_eq!(h.run(&["EXISTS", "a"]), int(0));
        assert_eq!(h.run(&["SMEMBERS", "new"]), set(&["y"]));
        assert_eq!(h.encoding("new"), Some("listpack"));
        h.run(&["SADD", "n", "1"]);
        h.run(&["SMOVE", "n", "numbers", "1"]);
        assert_eq!(h.encoding("numbers"), Some("intset"));
    }

    #[test]
    fn spop() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SPOP", "missing"]), Frame::Null);
        assert_eq!(h.run(&["SPOP", "missing", "3"]), set(&[]));
        h.run(&["SADD", "s", "a", "b", "c", "d"]);
        assert_eq!(h.run(&["SPOP", "s", "0"]), set(&[]));
        assert_eq!(h.run(&["SPOP", "s", "x"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["SPOP", "s", "-1"]),
            error("ERR value is out of range, must be positive")
        );
        assert_eq!(h.run(&["SPOP", "s", "1", "2"]), error(SYNTAX));
        let Frame::Bulk(one) = h.run(&["SPOP", "s"]) else {
            panic!("a member");
        };
        assert_eq!(
            h.run(&["SISMEMBER", "s", std::str::from_utf8(&one).unwrap()]),
            int(0)
        );
        let popped = sorted(h.run(&["SPOP", "s", "2"]));
        assert_eq!(popped.len(), 2);
        assert_eq!(h.run(&["SCARD", "s"]), int(1));
        let mut all: BTreeSet<String> = popped.into_iter().collect();
        all.insert(String::from_utf8(one.to_vec()).unwrap());
        all.extend(sorted(h.run(&["SPOP", "s", "5"])));
        assert_eq!(all.len(), 4);
        assert_eq!(h.run(&["EXISTS", "s"]), int(0));

        // Taking most of a big set rebuilds the rest as Redis does.
        sadd_many(&mut h, "big", "m", 300);
        assert_eq!(h.encoding("big"), Some("hashtable"));
        let popped = sorted(h.run(&["SPOP", "big", "290"]));
        assert_eq!(popped.len(), 290);
        assert_eq!(h.run(&["SCARD", "big"]), int(10));
        assert_eq!(h.encoding("big"), Some("listpack"));
        let rest = sorted(h.run(&["SMEMBERS", "big"]));
        assert!(rest.iter().all(|member| !popped.contains(member)));
        // An intset stays one.
        sadd_many(&mut h, "ints", "", 100);
        sorted(h.run(&["SPOP", "ints", "95"]));
        assert_eq!(h.encoding("ints"), Some("intset"));
        assert_eq!(h.run(&["SCARD", "ints"]), int(5));
        // Taking a few leaves the encoding alone.
        sorted(h.run(&["SPOP", "big", "2"]));
        assert_eq!(h.encoding("big"), Some("listpack"));
    }

    #[test]
    fn srandmember() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SRANDMEMBER", "missing"]), Frame::Null);
        assert_eq!(h.run(&["SRANDMEMBER", "missing", "3"]), array(&[]));
        h.run(&["SADD", "s", "a", "b", "c"]);
        assert_eq!(h.run(&["SRANDMEMBER", "s", "0"]), array(&[]));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "3"]), array(&["a", "b", "c"]));
        assert_eq!(h.run(&["SRANDMEMBER", "s", "30"]), array(&["a", "b", "c"]));
        for _ in 0..20 {
            let Frame::Array(items) = h.run(&["SRANDMEMBER", "s", "2"]) else {
                panic!("an array");
            };
            assert_eq!(items.len(), 2);
            assert!(
                items[0].as_bytes() < items[1].as_bytes(),
                "distinct, in order"
            );
        }
        let Frame::Array(items) = h.run(&["SRANDMEMBER", "s", "-20"]) else {
            panic!("an array");
        };
        assert_eq!(items.len(), 20);
        let distinct: BTreeSet<_> = items
            .iter()
            .map(|item| item.as_bytes().unwrap().to_vec())
            .collect();
        assert!(distinct.len() > 1);
        assert_eq!(h.run(&["SRANDMEMBER", "s", "x"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["SRANDMEMBER", "s", "-9223372036854775808"]),
            error("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        );
        assert_eq!(h.run(&["SRANDMEMBER", "s", "1", "2"]), error(SYNTAX));
        assert_eq!(h.run(&["SCARD", "s"]), int(3));
        sadd_many(&mut h, "ints", "", 50);
        let Frame::Bulk(member) = h.run(&["SRANDMEMBER", "ints"]) else {
            panic!("a member");
        };
        assert!(
            std::str::from_utf8(&member)
                .unwrap()
                .parse::<u32>()
                .unwrap()
                < 50
        );
    }

    /// Replicas with the same seed draw the same members and keep the same sets.
    #[test]
    fn random_choices_are_deterministic() {
        let run = || {
            let mut h = Harness::new();
            sadd_many(&mut h, "big", "m", 400);
            sadd_many(&mut h, "small", "", 40);
            let mut replies = Vec::new();
            for words in [
                &["SRANDMEMBER", "big"][..],
                &["SRANDMEMBER", "big", "5"],
                &["SRANDMEMBER", "big", "300"],
                &["SRANDMEMBER", "big", "-5"],
                &["SPOP", "big"],
                &["SPOP", "big", "3"],
                &["SPOP", "small", "2"],
                &["SPOP", "small", "35"],
            ] {
                for _ in 0..3 {
                    replies.push(h.run(words));
                }
            }
            (replies, crate::digest::digest(&h.keyspace, NOW))
        };
        let first = run();
        assert_eq!(first, run());
    }

    #[test]
    fn intersections() {
        let mut h = Harness::new();
        h.run(&["SADD", "a", "x", "y", "z", "w"]);
        h.run(&["SADD", "b", "y", "z", "q"]);
        h.run(&["SADD", "c", "z", "y", "x"]);
        // Ordered as the smallest set.
        assert_eq!(h.run(&["SINTER", "a", "b", "c"]), set(&["y", "z"]));
        assert_eq!(h.run(&["SINTER", "a"]), set(&["x", "y", "z", "w"]));
        assert_eq!(h.run(&["SINTER", "a", "a"]), set(&["x", "y", "z", "w"]));
        assert_eq!(h.run(&["SINTER", "a", "missing"]), set(&[]));
        assert_eq!(h.run(&["SINTERCARD", "3", "a", "b", "c"]), int(2));
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "LIMIT", "3"]), int(3));
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "LIMIT", "0"]), int(4));
        assert_eq!(h.run(&["SINTERCARD", "2", "a", "missing"]), int(0));
        assert_eq!(h.run(&["SINTERSTORE", "d", "a", "b"]), int(2));
        assert_eq!(h.run(&["SMEMBERS", "d"]), set(&["y", "z"]));
        // The destination is replaced whatever it held, TTL included.
        h.set_with_expiry("str", "v", NOW + 1000);
        assert_eq!(h.run(&["SINTERSTORE", "str", "a", "c"]), int(3));
        assert_eq!(h.run(&["TYPE", "str"]), Frame::simple("set"));
        assert_eq!(h.expire_at("str"), None);
        // An empty result deletes the destination.
        assert_eq!(h.run(&["SINTERSTORE", "d", "a", "missing"]), int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        h.run(&["SADD", "d", "old"]);
        h.run(&["SADD", "e", "none"]);
        assert_eq!(h.run(&["SINTERSTORE", "d", "a", "e"]), int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        // An all-integer result is an intset.
        h.run(&["SADD", "n1", "3", "x", "1", "2"]);
        h.run(&["SADD", "n2", "2", "1", "3", "y"]);
        assert_eq!(h.run(&["SINTERSTORE", "n", "n1", "n2"]), int(3));
        assert_eq!(h.encoding("n"), Some("intset"));
        assert_eq!(h.run(&["SMEMBERS", "n"]), set(&["1", "2", "3"]));
    }

    #[test]
    fn sintercard_errors_in_redis_order() {
        let mut h = Harness::new();
        let numkeys = error("ERR numkeys should be greater than 0");
        assert_eq!(h.run(&["SINTERCARD", "0", "a"]), numkeys);
        assert_eq!(h.run(&["SINTERCARD", "-1", "a"]), numkeys);
        assert_eq!(h.run(&["SINTERCARD", "x", "a"]), numkeys);
        assert_eq!(
            h.run(&["SINTERCARD", "3", "a", "b"]),
            error("ERR Number of keys can't be greater than number of args")
        );
        let limit = error("ERR LIMIT can't be negative");
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "LIMIT", "-1"]), limit);
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "LIMIT", "x"]), limit);
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "LIMIT"]), error(SYNTAX));
        assert_eq!(h.run(&["SINTERCARD", "1", "a", "b"]), error(SYNTAX));
        // Arguments are checked before the keys.
        h.set("s", "v");
        assert_eq!(h.run(&["SINTERCARD", "1", "s", "LIMIT", "-1"]), limit);
    }

    #[test]
    fn unions_and_differences() {
        let mut h = Harness::new();
        h.run(&["SADD", "a", "x", "y", "z"]);
        h.run(&["SADD", "b", "y", "q"]);
        h.run(&["SADD", "n", "2", "1"]);
        assert_eq!(
            h.run(&["SUNION", "a", "b", "missing"]),
            set(&["x", "y", "z", "q"])
        );
        assert_eq!(h.run(&["SUNION", "missing"]), set(&[]));
        // A union starts as an intset, so integers come out sorted.
        assert_eq!(h.run(&["SUNION", "n"]), set(&["1", "2"]));
        assert_eq!(h.run(&["SUNIONSTORE", "u", "n", "b"]), int(4));
        assert_eq!(h.run(&["SMEMBERS", "u"]), set(&["1", "2", "y", "q"]));
        assert_eq!(h.run(&["SUNIONSTORE", "ui", "n", "n"]), int(2));
        assert_eq!(h.encoding("ui"), Some("intset"));
        assert_eq!(h.run(&["SDIFF", "a", "b"]), set(&["x", "z"]));
        assert_eq!(h.run(&["SDIFF", "a", "missing", "b"]), set(&["x", "z"]));
        assert_eq!(h.run(&["SDIFF", "missing", "a"]), set(&[]));
        assert_eq!(h.run(&["SDIFF", "a", "a"]), set(&[]));
        assert_eq!(h.run(&["SDIFF", "a"]), set(&["x", "y", "z"]));
        assert_eq!(h.run(&["SDIFFSTORE", "d", "a", "b"]), int(2));
        assert_eq!(h.run(&["SMEMBERS", "d"]), set(&["x", "z"]));
        assert_eq!(h.run(&["SDIFFSTORE", "d", "a", "a"]), int(0));
        assert_eq!(h.run(&["EXISTS", "d"]), int(0));
        h.run(&["RPUSH", "list", "x"]);
        assert_eq!(h.run(&["SUNIONSTORE", "list", "a"]), int(3));
        assert_eq!(h.run(&["TYPE", "list"]), Frame::simple("set"));
        assert_eq!(h.run(&["SUNIONSTORE", "list", "missing"]), int(0));
        assert_eq!(h.run(&["EXISTS", "list"]), int(0));
        // Big unions convert as they grow.
        sadd_many(&mut h, "m1", "m", 100);
        sadd_many(&mut h, "m2", "n", 100);
        assert_eq!(h.run(&["SUNIONSTORE", "mm", "m1", "m2"]), int(200));
        assert_eq!(h.encoding("mm"), Some("hashtable"));
    }

    #[test]
    fn sscan() {
        let mut h = Harness::new();
        assert_eq!(
            h.run(&["SSCAN", "missing", "0"]),
            Frame::Array(vec![bulk("0"), array(&[])])
        );
        h.run(&["SADD", "s", "a", "b", "ab"]);
        assert_eq!(
            h.run(&["SSCAN", "s", "0", "COUNT", "1"]),
            Frame::Array(vec![bulk("0"), array(&["a", "b", "ab"])])
        );
        assert_eq!(
            h.run(&["SSCAN", "s", "0", "MATCH", "a*"]),
            Frame::Array(vec![bulk("0"), array(&["a", "ab"])])
        );
        h.run(&["SADD", "n", "3", "1"]);
        assert_eq!(
            h.run(&["SSCAN", "n", "0"]),
            Frame::Array(vec![bulk("0"), array(&["1", "3"])])
        );
        assert_eq!(h.run(&["SSCAN", "s", "abc"]), error("ERR invalid cursor"));
        assert_eq!(h.run(&["SSCAN", "s", "0", "COUNT", "0"]), error(SYNTAX));
        assert_eq!(h.run(&["SSCAN", "s", "0", "TYPE", "set"]), error(SYNTAX));
        sadd_many(&mut h, "big", "m", 1000);
        let mut seen = BTreeSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let Frame::Array(reply) = h.run(&["SSCAN", "big", &cursor, "COUNT", "100"]) else {
                panic!("SSCAN reply");
            };
            calls += 1;
            let Frame::Array(items) = &reply[1] else {
                panic!("items");
            };
            for item in items {
                assert!(seen.insert(item.as_bytes().unwrap().to_vec()), "repeated");
            }
            // Churn between the calls: remove members already returned.
            if let Some(Frame::Bulk(member)) = items.first() {
                h.run_bytes(&[b"SREM", b"big", member]);
            }
            cursor = String::from_utf8_lossy(reply[0].as_bytes().unwrap()).into_owned();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
        assert!(calls >= 10);
    }

    #[test]
    fn dump_restore_copy_and_digests() {
        let mut h = Harness::new();
        h.run(&["SADD", "ints", "3", "1", "2"]);
        h.run(&["SADD", "strs", "b", "a", "12"]);
        sadd_many(&mut h, "big", "m", 300);
        for index in (0..300).step_by(7) {
            h.run(&["SREM", "big", &format!("m{index}")]);
        }
        for (key, encoding) in [
            ("ints", "intset"),
            ("strs", "listpack"),
            ("big", "hashtable"),
        ] {
            let Frame::Bulk(payload) = h.run(&["DUMP", key]) else {
                panic!("DUMP of a set");
            };
            let copy = format!("{key}-copy");
            assert_eq!(
                h.run_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &payload]),
                Frame::OK
            );
            assert_eq!(h.encoding(&copy), Some(encoding));
            assert_eq!(h.get(&copy), h.get(key), "{key}: same members, same order");
            assert_eq!(h.run(&["SMEMBERS", &copy]), h.run(&["SMEMBERS", key]));
            let value_digest = |h: &Harness, key: &str| crate::digest::value_digest(h.entry(key));
            assert_eq!(value_digest(&h, key), value_digest(&h, &copy));
        }
        assert_eq!(h.run(&["COPY", "big", "big2"]), int(1));
        assert_eq!(
            h.run(&["SSCAN", "big2", "0"]),
            h.run(&["SSCAN", "big", "0"])
        );
        assert!(!h.run(&["SRANDMEMBER", "big2", "-3"]).is_error());
        let before = crate::digest::digest(&h.keyspace, NOW);
        h.run(&["SADD", "strs", "new"]);
        assert_ne!(crate::digest::digest(&h.keyspace, NOW), before);
        h.run(&["SREM", "strs", "new"]);
        assert_eq!(crate::digest::digest(&h.keyspace, NOW), before);
    }

    #[test]
    fn debug_object_lengths() {
        let mut h = Harness::new();
        let line = |h: &Harness, key: &str| {
            crate::digest::debug_object(&h.keyspace, h.entry(key).unwrap(), &h.context)
        };
        h.run(&["SADD", "ints", "1", "2"]);
        // One intset blob: 8-byte header and two 16-bit integers, one length byte.
        assert!(line(&h, "ints").contains(" encoding:intset serializedlength:13 "));
        h.run(&["SADD", "strs", "a", "bc"]);
        assert!(line(&h, "strs").contains(" encoding:listpack serializedlength:15 "));
        sadd_many(&mut h, "big", "", 600);
        assert!(line(&h, "big").contains(" encoding:hashtable "));
    }

    #[test]
    fn dirty_counts_changes() {
        let mut h = Harness::new();
        let start = h.keyspace.stats.dirty;
        h.run(&["SADD", "s", "a", "b", "a"]);
        assert_eq!(h.keyspace.stats.dirty, start + 2);
        h.run(&["SREM", "s", "zz"]);
        h.run(&["SMEMBERS", "s"]);
        h.run(&["SMOVE", "s", "t", "zz"]);
        assert_eq!(h.keyspace.stats.dirty, start + 2);
        h.run(&["SMOVE", "s", "t", "a"]);
        assert_eq!(h.keyspace.stats.dirty, start + 4);
        h.run(&["SPOP", "s"]);
        assert_eq!(h.keyspace.stats.dirty, start + 5);
        h.run(&["SINTERSTORE", "d", "t"]);
        assert_eq!(h.keyspace.stats.dirty, start + 6);
    }
}
