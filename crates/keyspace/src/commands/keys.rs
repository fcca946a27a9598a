//! Generic key commands (DEL, EXPIRE, RENAME, SCAN, OBJECT, DUMP/RESTORE, ...) and
//! the database-wide ones Redis files under "server" (FLUSHDB, FLUSHALL, SWAPDB).

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::{args, digest, errors, Context, Entry, Keyspace};
use bytes::Bytes;
use resp::Frame;

const EXPIRE_FLAGS_NX_CONFLICT: &str =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
const EXPIRE_FLAGS_GT_LT: &str = "ERR GT and LT options at the same time are not compatible";
const MOVE_IN_CLUSTER: &str = "ERR MOVE is not allowed in cluster mode";
const SWAPDB_IN_CLUSTER: &str = "ERR SWAPDB is not allowed in cluster mode";
const COPY_IN_CLUSTER: &str = "ERR Copying to another database is not allowed in cluster mode";
const INT_OUT_OF_RANGE: &str =
    "ERR value is out of range, must be between -2147483648 and 2147483647";
const INVALID_FIRST_DB: &str = "ERR invalid first DB index";
const INVALID_SECOND_DB: &str = "ERR invalid second DB index";
const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const NO_LRU: &str = "ERR An LRU maxmemory policy is selected, access time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

const KEYSPACE_WRITE_FAST: &[&str] = &["keyspace", "write", "fast"];
const KEYSPACE_READ_FAST: &[&str] = &["keyspace", "read", "fast"];
const MULTI_SHARD_SUM: &[&str] = &["request_policy:multi_shard", "response_policy:agg_sum"];
const ALL_SHARDS_SUCCEEDED: &[&str] =
    &["request_policy:all_shards", "response_policy:all_succeeded"];
const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];
const ONE_KEY_RW_UPDATE: &[KeySpec] = &[KeySpec::single(1, RW | UPDATE)];
const ONE_KEY_RO_ACCESS: &[KeySpec] = &[KeySpec::single(1, RO | ACCESS)];
const OBJECT_KEY: &[KeySpec] = &[KeySpec::single(2, RO)];
const RESTORE_COMPLEXITY: &str = "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).";

/// An EXPIRE-family row.
const fn expire_spec(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    run: fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: -3,
        flags: WRITE | FAST,
        key_specs: ONE_KEY_RW_UPDATE,
        categories: KEYSPACE_WRITE_FAST,
        summary,
        since,
        handler: Handler::Keyspace(run),
        ..CommandSpec::DEFAULT
    }
}

/// A TTL-family row.
const fn ttl_spec(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    tips: &'static [&'static str],
    run: fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: 2,
        flags: READONLY | FAST,
        key_specs: ONE_KEY_RO_ACCESS,
        categories: KEYSPACE_READ_FAST,
        tips,
        summary,
        since,
        handler: Handler::Keyspace(run),
        ..CommandSpec::DEFAULT
    }
}

/// An OBJECT subcommand taking a key.
const fn object_spec(
    name: &'static str,
    summary: &'static str,
    since: &'static str,
    run: fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame,
) -> CommandSpec {
    CommandSpec {
        name,
        arity: 3,
        flags: READONLY,
        key_specs: OBJECT_KEY,
        categories: &["keyspace", "read", "slow"],
        tips: NONDETERMINISTIC,
        summary,
        since,
        handler: Handler::Keyspace(run),
        ..CommandSpec::DEFAULT
    }
}

const OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    object_spec(
        "object|encoding",
        "Returns the internal encoding of a Redis object.",
        "2.2.3",
        object_encoding,
    ),
    object_spec(
        "object|freq",
        "Returns the logarithmic access frequency counter of a Redis object.",
        "4.0.0",
        object_freq,
    ),
    object_spec(
        "object|idletime",
        "Returns the time since the last access to a Redis object.",
        "2.2.3",
        object_idletime,
    ),
    object_spec(
        "object|refcount",
        "Returns the reference count of a value of a key.",
        "2.2.3",
        object_refcount,
    ),
    CommandSpec {
        name: "object|help",
        arity: 2,
        flags: LOADING | STALE,
        categories: &["keyspace", "slow"],
        summary: "Returns helpful text about the different subcommands.",
        since: "6.2.0",
        handler: Handler::Keyspace(object_help),
        ..CommandSpec::DEFAULT
    },
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "del",
        arity: -2,
        flags: WRITE,
        key_specs: &[KeySpec::range(1, -1, 1, RM | DELETE)],
        categories: &["keyspace", "write", "slow"],
        tips: MULTI_SHARD_SUM,
        summary: "Deletes one or more keys.",
        complexity: "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
        handler: Handler::Keyspace(del),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unlink",
        arity: -2,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::range(1, -1, 1, RM | DELETE)],
        categories: KEYSPACE_WRITE_FAST,
        tips: MULTI_SHARD_SUM,
        summary: "Asynchronously deletes one or more keys.",
        since: "4.0.0",
        complexity: "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
        handler: Handler::Keyspace(del),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        arity: -2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::range(1, -1, 1, RO)],
        categories: KEYSPACE_READ_FAST,
        tips: MULTI_SHARD_SUM,
        summary: "Determines whether one or more keys exist.",
        complexity: "O(N) where N is the number of keys to check.",
        handler: Handler::Keyspace(exists),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "type",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: KEYSPACE_READ_FAST,
        summary: "Determines the type of value stored at a key.",
        handler: Handler::Keyspace(type_command),
        ..CommandSpec::DEFAULT
    },
    expire_spec("expire", "Sets the expiration time of a key in seconds.", "1.0.0", expire),
    expire_spec("pexpire", "Sets the expiration time of a key in milliseconds.", "2.6.0", pexpire),
    expire_spec("expireat", "Sets the expiration time of a key to a Unix timestamp.", "1.2.0", expireat),
    expire_spec(
        "pexpireat",
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        "2.6.0",
        pexpireat,
    ),
    ttl_spec("ttl", "Returns the expiration time in seconds of a key.", "1.0.0", NONDETERMINISTIC, ttl),
    ttl_spec("pttl", "Returns the expiration time in milliseconds of a key.", "2.6.0", NONDETERMINISTIC, pttl),
    ttl_spec("expiretime", "Returns the expiration time of a key as a Unix timestamp.", "7.0.0", &[], expiretime),
    ttl_spec(
        "pexpiretime",
        "Returns the expiration time of a key as a Unix milliseconds timestamp.",
        "7.0.0",
        &[],
        pexpiretime,
    ),
    CommandSpec {
        name: "persist",
        arity: 2,
        flags: WRITE | FAST,
        key_specs: ONE_KEY_RW_UPDATE,
        categories: KEYSPACE_WRITE_FAST,
        summary: "Removes the expiration time of a key.",
        since: "2.2.0",
        handler: Handler::Keyspace(persist),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "rename",
        arity: 3,
        flags: WRITE,
        key_specs: &[KeySpec::single(1, RW | ACCESS | DELETE), KeySpec::single(2, OW | UPDATE)],
        categories: &["keyspace", "write", "slow"],
        summary: "Renames a key and overwrites the destination.",
        handler: Handler::Keyspace(rename),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "renamenx",
        arity: 3,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | DELETE), KeySpec::single(2, OW | INSERT)],
        categories: KEYSPACE_WRITE_FAST,
        summary: "Renames a key only when the target key name doesn't exist.",
        handler: Handler::Keyspace(renamenx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "copy",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RO | ACCESS), KeySpec::single(2, OW | UPDATE)],
        categories: &["keyspace", "write", "slow"],
        summary: "Copies the value of a key to a new key.",
        since: "6.2.0",
        complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        handler: Handler::Keyspace(copy),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "move",
        arity: 3,
        flags: WRITE | FAST,
        key_specs: ONE_KEY_RW_UPDATE,
        categories: KEYSPACE_WRITE_FAST,
        summary: "Moves a key to another database.",
        handler: Handler::Keyspace(move_command),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "keys",
        arity: 2,
        flags: READONLY,
        categories: &["keyspace", "read", "slow", "dangerous"],
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        summary: "Returns all key names that match a pattern.",
        complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        handler: Handler::Keyspace(keys),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "scan",
        arity: -2,
        flags: READONLY,
        categories: &["keyspace", "read", "slow"],
        tips: &["nondeterministic_output", "request_policy:special", "response_policy:special"],
        summary: "Iterates over the key names in the database.",
        since: "2.8.0",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        handler: Handler::Keyspace(scan),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "randomkey",
        arity: 1,
        flags: READONLY,
        categories: &["keyspace", "read", "slow"],
        tips: &["request_policy:all_shards", "response_policy:special", "nondeterministic_output"],
        summary: "Returns a random key name from the database.",
        handler: Handler::Keyspace(randomkey),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushdb",
        arity: -1,
        flags: WRITE,
        categories: &["keyspace", "write", "slow", "dangerous"],
        tips: ALL_SHARDS_SUCCEEDED,
        group: "server",
        summary: "Remove all keys from the current database.",
        complexity: "O(N) where N is the number of keys in the selected database",
        handler: Handler::Keyspace(flushdb),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushall",
        arity: -1,
        flags: WRITE,
        categories: &["keyspace", "write", "slow", "dangerous"],
        tips: ALL_SHARDS_SUCCEEDED,
        group: "server",
        summary: "Removes all keys from all databases.",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: Handler::Keyspace(flushall),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "swapdb",
        arity: 3,
        flags: WRITE | FAST,
        categories: &["keyspace", "write", "fast", "dangerous"],
        group: "server",
        summary: "Swaps two Redis databases.",
        since: "4.0.0",
        complexity: "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        handler: Handler::Keyspace(swapdb),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "touch",
        arity: -2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::range(1, -1, 1, RO)],
        categories: KEYSPACE_READ_FAST,
        tips: MULTI_SHARD_SUM,
        summary: "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        since: "3.2.1",
        complexity: "O(N) where N is the number of keys that will be touched.",
        handler: Handler::Keyspace(touch),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "object",
        arity: -2,
        categories: &["slow"],
        summary: "A container for object introspection commands.",
        since: "2.2.3",
        complexity: "Depends on subcommand.",
        subcommands: OBJECT_SUBCOMMANDS,
        handler: Handler::Container,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "dump",
        arity: 2,
        flags: READONLY,
        key_specs: ONE_KEY_RO_ACCESS,
        categories: &["keyspace", "read", "slow"],
        tips: NONDETERMINISTIC,
        summary: "Returns a serialized representation of the value stored at a key.",
        since: "2.6.0",
        complexity: "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        handler: Handler::Keyspace(dump_command),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "restore",
        arity: -4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, OW | UPDATE)],
        categories: &["keyspace", "write", "slow", "dangerous"],
        summary: "Creates a key from the serialized representation of a value.",
        since: "2.6.0",
        complexity: RESTORE_COMPLEXITY,
        handler: Handler::Keyspace(restore),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "restore-asking",
        arity: -4,
        flags: WRITE | DENYOOM | ASKING,
        key_specs: &[KeySpec::single(1, OW | UPDATE)],
        categories: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        summary: "An internal command for migrating keys in a cluster.",
        since: "3.0.0",
        complexity: RESTORE_COMPLEXITY,
        handler: Handler::Keyspace(restore),
        ..CommandSpec::DEFAULT
    },
];

// ---- helpers ----------------------------------------------------------------

/// A read lookup that counts a hit or miss but leaves the access data alone
/// (Redis's `LOOKUP_NOTOUCH`: EXISTS, TYPE, TTL, OBJECT). Hands back the keyspace
/// read-only alongside the entry.
fn read_untouched<'a>(
    keyspace: &'a mut Keyspace,
    context: &Context,
    key: &[u8],
) -> Option<(&'a Keyspace, &'a Entry)> {
    keyspace.read_untouched(context, key)?;
    let keyspace: &'a Keyspace = keyspace;
    let entry = keyspace.db_ref(context.db).peek(key, context.now_ms)?;
    Some((keyspace, entry))
}

/// `now_ms` as Redis's signed millisecond time.
fn now_signed(context: &Context) -> i64 {
    i64::try_from(context.now_ms).unwrap_or(i64::MAX)
}

/// An integer argument within C's `int`, as `getIntFromObjectOrReply` with no
/// custom message.
fn parse_i32(argument: &[u8]) -> Result<i32, Frame> {
    let value = args::parse_i64(argument)?;
    i32::try_from(value).map_err(|_| Frame::error(INT_OUT_OF_RANGE))
}

/// A database index argument (`int`, then within the configured databases).
fn parse_db_index(keyspace: &Keyspace, argument: &[u8]) -> Result<usize, Frame> {
    let index = parse_i32(argument)?;
    usize::try_from(index)
        .ok()
        .filter(|&index| index < keyspace.database_count())
        .ok_or_else(|| Frame::error(errors::DB_INDEX_OUT_OF_RANGE))
}

fn status(text: &'static str) -> Frame {
    Frame::simple(text)
}

// ---- DEL, UNLINK, EXISTS, TOUCH, TYPE ---------------------------------------

fn del(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let deleted = arguments[1..]
        .iter()
        .filter(|key| keyspace.delete(context, key))
        .count();
    Frame::Integer(deleted as i64)
}

fn exists(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let found = arguments[1..]
        .iter()
        .filter(|key| read_untouched(keyspace, context, key).is_some())
        .count();
    Frame::Integer(found as i64)
}

fn touch(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // TOUCH touches even for a client in CLIENT NO-TOUCH mode, as in Redis.
    let no_touch = std::mem::replace(&mut context.no_touch, false);
    let touched = arguments[1..]
        .iter()
        .filter(|key| keyspace.read(context, key).is_some())
        .count();
    context.no_touch = no_touch;
    Frame::Integer(touched as i64)
}

fn type_command(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_untouched(keyspace, context, &arguments[1]) {
        Some((_, entry)) => status(entry.value.type_name()),
        None => status("none"),
    }
}

// ---- EXPIRE family ----------------------------------------------------------

#[derive(Default)]
struct ExpireConditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_conditions(options: &[Bytes]) -> Result<ExpireConditions, Frame> {
    let mut conditions = ExpireConditions::default();
    for option in options {
        if args::is_keyword(option, "NX") {
            conditions.nx = true;
        } else if args::is_keyword(option, "XX") {
            conditions.xx = true;
        } else if args::is_keyword(option, "GT") {
            conditions.gt = true;
        } else if args::is_keyword(option, "LT") {
            conditions.lt = true;
        } else {
            return Err(Frame::error_owned(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if conditions.nx && (conditions.xx || conditions.gt || conditions.lt) {
        return Err(Frame::error(EXPIRE_FLAGS_NX_CONFLICT));
    }
    if conditions.gt && conditions.lt {
        return Err(Frame::error(EXPIRE_FLAGS_GT_LT));
    }
    Ok(conditions)
}

/// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: `base_ms` is added to the (converted)
/// argument; `seconds` says the argument is in seconds.
fn expire_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    name: &str,
    base_ms: i64,
    seconds: bool,
) -> Frame {
    let conditions = match parse_expire_conditions(&arguments[3..]) {
        Ok(conditions) => conditions,
        Err(error) => return error,
    };
    let mut when = match args::parse_i64(&arguments[2]) {
        Ok(when) => when,
        Err(error) => return error,
    };
    if seconds {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return Frame::error_owned(errors::invalid_expire(name)),
        }
    }
    let Some(when) = when.checked_add(base_ms) else {
        return Frame::error_owned(errors::invalid_expire(name));
    };

    let key = &arguments[1];
    let Some(entry) = keyspace.lookup_write(context, key) else {
        return Frame::Integer(0);
    };
    // No TTL counts as an infinite one: GT never passes, LT always does.
    let current = entry
        .expire_at_ms()
        .map(|at| i64::try_from(at).unwrap_or(i64::MAX));
    let refused = (conditions.nx && current.is_some())
        || (conditions.xx && current.is_none())
        || (conditions.gt && current.is_none_or(|current| when <= current))
        || (conditions.lt && current.is_some_and(|current| when >= current));
    if refused {
        return Frame::Integer(0);
    }

    let db = keyspace.db(context.db);
    if when <= now_signed(context) {
        db.remove(key);
    } else {
        // `when` is past `now_ms`, hence positive.
        db.set_expire(key, when as u64);
    }
    keyspace.stats.dirty += 1;
    Frame::Integer(1)
}

fn expire(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let base = now_signed(context);
    expire_generic(keyspace, context, arguments, "expire", base, true)
}

fn pexpire(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let base = now_signed(context);
    expire_generic(keyspace, context, arguments, "pexpire", base, false)
}

fn expireat(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    expire_generic(keyspace, context, arguments, "expireat", 0, true)
}

fn pexpireat(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    expire_generic(keyspace, context, arguments, "pexpireat", 0, false)
}

// ---- TTL family, PERSIST ----------------------------------------------------

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 without a TTL,
/// else the remaining (or absolute) time, rounded to the nearest second when
/// answering in seconds.
fn ttl_generic(
    keyspace: &mut Keyspace,
    context: &Context,
    key: &[u8],
    ms: bool,
    absolute: bool,
) -> Frame {
    let Some((_, entry)) = read_untouched(keyspace, context, key) else {
        return Frame::Integer(-2);
    };
    let Some(expire_at) = entry.expire_at_ms() else {
        return Frame::Integer(-1);
    };
    let expire_at = i128::from(expire_at);
    let time = if absolute {
        expire_at
    } else {
        (expire_at - i128::from(context.now_ms)).max(0)
    };
    let time = if ms { time } else { (time + 500) / 1000 };
    Frame::Integer(i64::try_from(time).unwrap_or(i64::MAX))
}

fn ttl(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    ttl_generic(keyspace, context, &arguments[1], false, false)
}

fn pttl(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    ttl_generic(keyspace, context, &arguments[1], true, false)
}

fn expiretime(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    ttl_generic(keyspace, context, &arguments[1], false, true)
}

fn pexpiretime(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    ttl_generic(keyspace, context, &arguments[1], true, true)
}

fn persist(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    if keyspace.lookup_write(context, key).is_none() {
        return Frame::Integer(0);
    }
    if keyspace.db(context.db).persist(key) {
        keyspace.stats.dirty += 1;
        Frame::Integer(1)
    } else {
        Frame::Integer(0)
    }
}

// ---- RENAME, RENAMENX, COPY, MOVE -------------------------------------------

fn rename_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    nx: bool,
) -> Frame {
    let (source, target) = (&arguments[1], &arguments[2]);
    if keyspace.lookup_write(context, source).is_none() {
        return Frame::error(errors::NO_SUCH_KEY);
    }
    let done = if nx { Frame::Integer(1) } else { Frame::OK };
    if source == target {
        return if nx { Frame::Integer(0) } else { Frame::OK };
    }
    // Looked up either way so an expired destination is reclaimed as in Redis.
    let target_exists = keyspace.lookup_write(context, target).is_some();
    if nx && target_exists {
        return Frame::Integer(0);
    }
    let db = keyspace.db(context.db);
    let Some(entry) = db.remove(source) else {
        return Frame::error(errors::NO_SUCH_KEY);
    };
    let serves_blocked = entry.value.can_serve_blocked();
    let stream = matches!(entry.value, crate::Value::Stream(_));
    // The whole entry moves: value, TTL and access data.
    db.insert_entry(target, entry);
    if serves_blocked {
        keyspace.signal_ready(context.db, target);
    }
    if stream {
        // XREADGROUP waiters on the old name learn that it is gone.
        keyspace.signal_ready(context.db, source);
    }
    keyspace.stats.dirty += 1;
    done
}

fn rename(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    rename_generic(keyspace, context, arguments, false)
}

fn renamenx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    rename_generic(keyspace, context, arguments, true)
}

fn copy(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let source_db = context.db;
    let mut target_db = context.db;
    let mut replace = false;
    let mut index = 3;
    while index < arguments.len() {
        let option = &arguments[index];
        let additional = arguments.len() - index - 1;
        if args::is_keyword(option, "REPLACE") {
            replace = true;
        } else if args::is_keyword(option, "DB") && additional >= 1 {
            match parse_db_index(keyspace, &arguments[index + 1]) {
                Ok(db) => target_db = db,
                Err(error) => return error,
            }
            index += 1;
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 1;
    }
    if context.cluster_mode && (source_db != 0 || target_db != 0) {
        return Frame::error(COPY_IN_CLUSTER);
    }
    let (source, target) = (&arguments[1], &arguments[2]);
    if source_db == target_db && source == target {
        return Frame::error(errors::SAME_OBJECT);
    }
    let Some(entry) = keyspace.read(context, source) else {
        return Frame::Integer(0);
    };
    let value = entry.value.clone();
    let expire_at = entry.expire_at_ms();
    // A copy is a new object: fresh access data.
    let access = keyspace.initial_access(context);
    let db = keyspace.db(target_db);
    if db.contains(target, context.now_ms) && !replace {
        return Frame::Integer(0);
    }
    let serves_blocked = value.can_serve_blocked();
    db.set(target, value, expire_at, access);
    if serves_blocked {
        keyspace.signal_ready(target_db, target);
    }
    keyspace.stats.dirty += 1;
    Frame::Integer(1)
}

fn move_command(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if context.cluster_mode {
        return Frame::error(MOVE_IN_CLUSTER);
    }
    let target_db = match parse_db_index(keyspace, &arguments[2]) {
        Ok(db) => db,
        Err(error) => return error,
    };
    if target_db == context.db {
        return Frame::error(errors::SAME_OBJECT);
    }
    let key = &arguments[1];
    if keyspace.lookup_write(context, key).is_none() {
        return Frame::Integer(0);
    }
    if keyspace.db(target_db).contains(key, context.now_ms) {
        return Frame::Integer(0);
    }
    let Some(entry) = keyspace.db(context.db).remove(key) else {
        return Frame::Integer(0);
    };
    let serves_blocked = entry.value.can_serve_blocked();
    let stream = matches!(entry.value, crate::Value::Stream(_));
    keyspace.db(target_db).insert_entry(key, entry);
    if serves_blocked {
        keyspace.signal_ready(target_db, key);
    }
    if stream {
        // XREADGROUP waiters in the source database learn that it is gone.
        keyspace.signal_ready(context.db, key);
    }
    keyspace.stats.dirty += 1;
    Frame::Integer(1)
}

// ---- KEYS, SCAN, RANDOMKEY --------------------------------------------------

fn keys(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let pattern = &arguments[1];
    let all = pattern.as_ref() == b"*";
    let found = keyspace
        .db_ref(context.db)
        .iter(context.now_ms)
        .filter(|(key, _)| all || glob_match(pattern, key, false))
        .map(|(key, _)| Frame::bulk_from_slice(key))
        .collect();
    Frame::Array(found)
}

/// A SCAN cursor as Redis reads it with `strtoul`: optional sign (a minus negates
/// modulo 2^64), decimal digits, nothing else, no leading space, no overflow. An
/// empty argument is cursor 0, as in Redis.
pub(crate) fn parse_cursor(argument: &[u8]) -> Option<u64> {
    if argument.is_empty() {
        return Some(0);
    }
    let (negative, digits) = match argument[0] {
        b'-' => (true, &argument[1..]),
        b'+' => (false, &argument[1..]),
        _ => (false, argument),
    };
    if digits.is_empty() {
        return None;
    }
    let mut cursor: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        cursor = cursor
            .checked_mul(10)?
            .checked_add(u64::from(byte - b'0'))?;
    }
    Some(if negative {
        cursor.wrapping_neg()
    } else {
        cursor
    })
}

fn scan(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = parse_cursor(&arguments[1]) else {
        return Frame::error(errors::CURSOR_INVALID);
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut index = 2;
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
            // "*" matches everything: no filtering.
            pattern = (text != b"*").then_some(text);
        } else if args::is_keyword(option, "TYPE") && has_value {
            type_name = Some(arguments[index + 1].as_ref());
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 2;
    }

    // Collect first, then filter, as Redis does: COUNT bounds the work, not the
    // number of keys returned.
    let now_ms = context.now_ms;
    let mut found: Vec<(Vec<u8>, &'static str)> = Vec::new();
    let next = keyspace.db_ref(context.db).scan(
        cursor,
        usize::try_from(count).unwrap_or(usize::MAX),
        now_ms,
        |key, entry| found.push((key.to_vec(), entry.value.type_name())),
    );
    let keys = found
        .into_iter()
        .filter(|(key, _)| pattern.is_none_or(|pattern| glob_match(pattern, key, false)))
        .filter(|(_, kind)| {
            type_name.is_none_or(|wanted| wanted.eq_ignore_ascii_case(kind.as_bytes()))
        })
        .map(|(key, _)| Frame::Bulk(Bytes::from(key)))
        .collect();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(keys),
    ])
}

fn randomkey(keyspace: &mut Keyspace, context: &mut Context, _: &[Bytes]) -> Frame {
    let now_ms = context.now_ms;
    let db = keyspace.db(context.db);
    if !context.lazy_expire {
        // Nothing may be reclaimed here, and an expired key is never the answer.
        return match db.random_key_live(now_ms, &mut context.rng) {
            Some(key) => Frame::Bulk(Bytes::from(key)),
            None => Frame::Null,
        };
    }
    // Each unlucky pick reclaims expired keys, so this ends: with a live key or
    // with an empty database.
    loop {
        match db.random_key(now_ms, &mut context.rng) {
            None => return Frame::Null,
            Some(key) if db.peek(&key, now_ms).is_some() => return Frame::Bulk(Bytes::from(key)),
            Some(key) => {
                // `random_key` gave up on a key that had expired: reclaim it too.
                db.remove_expired(&key);
            }
        }
    }
}

// ---- FLUSHDB, FLUSHALL, SWAPDB ----------------------------------------------

/// The optional ASYNC | SYNC argument; both flush synchronously here.
fn check_flush_mode(arguments: &[Bytes]) -> Result<(), Frame> {
    match arguments {
        [_] => Ok(()),
        [_, mode] if args::is_keyword(mode, "ASYNC") || args::is_keyword(mode, "SYNC") => Ok(()),
        _ => Err(Frame::error(errors::SYNTAX)),
    }
}

fn flushdb(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if let Err(error) = check_flush_mode(arguments) {
        return error;
    }
    keyspace.signal_streams_of(context.db);
    let db = keyspace.db(context.db);
    let removed = db.len() as u64;
    db.clear();
    keyspace.stats.dirty += removed;
    Frame::OK
}

fn flushall(keyspace: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    if let Err(error) = check_flush_mode(arguments) {
        return error;
    }
    let mut removed = 0u64;
    for index in 0..keyspace.database_count() {
        keyspace.signal_streams_of(index);
        let db = keyspace.db(index);
        removed += db.len() as u64;
        db.clear();
    }
    // One more, as Redis, so that flushing an empty dataset still counts as a write.
    keyspace.stats.dirty += removed + 1;
    Frame::OK
}

fn swapdb(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if context.cluster_mode {
        return Frame::error(SWAPDB_IN_CLUSTER);
    }
    let Ok(first) = parse_i32(&arguments[1]) else {
        return Frame::error(INVALID_FIRST_DB);
    };
    let Ok(second) = parse_i32(&arguments[2]) else {
        return Frame::error(INVALID_SECOND_DB);
    };
    let count = keyspace.database_count();
    let (Ok(first), Ok(second)) = (usize::try_from(first), usize::try_from(second)) else {
        return Frame::error(errors::DB_INDEX_OUT_OF_RANGE);
    };
    if first >= count || second >= count {
        return Frame::error(errors::DB_INDEX_OUT_OF_RANGE);
    }
    if first != second {
        keyspace.swap_dbs(first, second);
    }
    keyspace.stats.dirty += 1;
    Frame::OK
}

// ---- OBJECT -----------------------------------------------------------------

fn object_encoding(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_untouched(keyspace, context, &arguments[2]) {
        Some((_, entry)) => Frame::bulk(entry.value.encoding_name()),
        None => Frame::Null,
    }
}

fn object_refcount(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_untouched(keyspace, context, &arguments[2]) {
        Some((keyspace, entry)) => Frame::Integer(digest::refcount(keyspace, &entry.value)),
        None => Frame::Null,
    }
}

fn object_idletime(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_untouched(keyspace, context, &arguments[2]) {
        None => Frame::Null,
        Some((keyspace, _)) if keyspace.config.lfu => Frame::error(NO_LRU),
        Some((keyspace, entry)) => {
            Frame::Integer(i64::try_from(keyspace.idle_seconds(entry, context)).unwrap_or(i64::MAX))
        }
    }
}

fn object_freq(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_untouched(keyspace, context, &arguments[2]) {
        None => Frame::Null,
        Some((keyspace, _)) if !keyspace.config.lfu => Frame::error(NO_LFU),
        Some((keyspace, entry)) => Frame::Integer(i64::from(keyspace.lfu_counter(entry, context))),
    }
}

fn object_help(_: &mut Keyspace, _: &mut Context, _: &[Bytes]) -> Frame {
    let lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    ];
    Frame::Array(lines.into_iter().map(status).collect())
}

// ---- DUMP, RESTORE ----------------------------------------------------------

fn dump_command(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match keyspace.read(context, &arguments[1]) {
        Some(entry) => Frame::Bulk(Bytes::from(crate::rdb::dump(&entry.value))),
        None => Frame::Null,
    }
}

fn restore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let mut replace = false;
    let mut absolute = false;
    let mut idle_seconds: Option<i64> = None;
    let mut frequency: Option<i64> = None;
    let mut index = 4;
    while index < arguments.len() {
        let option = &arguments[index];
        let additional = arguments.len() - index - 1;
        if args::is_keyword(option, "REPLACE") {
            replace = true;
        } else if args::is_keyword(option, "ABSTTL") {
            absolute = true;
        } else if args::is_keyword(option, "IDLETIME") && additional >= 1 && frequency.is_none() {
            match args::parse_non_negative(&arguments[index + 1], INVALID_IDLETIME) {
                Ok(idle) => idle_seconds = Some(idle),
                Err(error) => return error,
            }
            index += 1;
        } else if args::is_keyword(option, "FREQ") && additional >= 1 && idle_seconds.is_none() {
            match args::parse_i64(&arguments[index + 1]) {
                Ok(freq) if (0..=255).contains(&freq) => frequency = Some(freq),
                Ok(_) => return Frame::error(INVALID_FREQ),
                Err(error) => return error,
            }
            index += 1;
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 1;
    }

    let key = &arguments[1];
    if !replace && keyspace.lookup_write(context, key).is_some() {
        return Frame::error(errors::BUSYKEY);
    }
    let ttl = match args::parse_non_negative(&arguments[2], errors::INVALID_TTL) {
        Ok(ttl) => ttl,
        Err(error) => return error,
    };
    let Ok(value) = crate::rdb::restore(&arguments[3]) else {
        return Frame::error(errors::BAD_DUMP_PAYLOAD);
    };

    let now = now_signed(context);
    let expire_at = if ttl == 0 {
        None
    } else if absolute {
        Some(ttl)
    } else {
        match ttl.checked_add(now) {
            Some(at) => Some(at),
            None => return Frame::error_owned(errors::invalid_expire("restore")),
        }
    };

    let mut access = keyspace.initial_access(context);
    if keyspace.config.lfu {
        if let Some(frequency) = frequency {
            // Keep the "minutes" half of fresh LFU data, set the counter.
            access = (access & !0xFF) | frequency as u32;
        }
    } else if let Some(idle) = idle_seconds {
        // The LRU clock is seconds, wrapping: go back `idle` seconds modulo it.
        access = access.wrapping_sub(idle as u64 as u32);
    }

    let db = keyspace.db(context.db);
    let deleted = replace && db.remove(key).is_some();
    match expire_at {
        Some(at) if at <= now => {
            // Already expired: the key is not created (an old one is gone).
            if deleted {
                keyspace.stats.dirty += 1;
            }
        }
        _ => {
            let serves_blocked = value.can_serve_blocked();
            db.set(key, value, expire_at.map(|at| at as u64), access);
            if serves_blocked {
                keyspace.signal_ready(context.db, key);
            }
            keyspace.stats.dirty += 1;
        }
    }
    Frame::OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{StringValue, Value};
    use std::collections::BTreeSet;

    use crate::testing::{Harness, START_MS};

    fn int(value: i64) -> Frame {
        Frame::Integer(value)
    }

    fn bulk(text: &str) -> Frame {
        Frame::bulk_from_slice(text.as_bytes())
    }

    fn error(text: &str) -> Frame {
        Frame::error_owned(text.to_string())
    }

    fn sorted_keys(frame: Frame) -> Vec<String> {
        let Frame::Array(items) = frame else {
            panic!("not an array: {frame:?}");
        };
        let mut keys: Vec<String> = items
            .into_iter()
            .map(|item| String::from_utf8(item.as_bytes().unwrap().to_vec()).unwrap())
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn del_unlink_exists_touch() {
        let mut h = Harness::new();
        h.set("a", "1");
        h.set("b", "2");
        h.set("c", "3");
        assert_eq!(h.run(&["EXISTS", "a", "a", "nope"]), int(2));
        assert_eq!(h.run(&["TOUCH", "a", "b", "nope"]), int(2));
        assert_eq!(h.run(&["DEL", "a", "nope", "a"]), int(1));
        assert_eq!(h.run(&["UNLINK", "b", "c"]), int(2));
        assert_eq!(h.run(&["EXISTS", "a", "b", "c"]), int(0));
        assert_eq!(
            h.run(&["DEL"]),
            error("ERR wrong number of arguments for 'del' command")
        );
    }

    #[test]
    fn exists_and_type_do_not_touch_but_touch_does() {
        let mut h = Harness::new();
        h.set("k", "v");
        h.advance(30_000);
        h.run(&["EXISTS", "k"]);
        h.run(&["TYPE", "k"]);
        h.run(&["TTL", "k"]);
        h.run(&["OBJECT", "ENCODING", "k"]);
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(30));
        assert_eq!(h.run(&["TOUCH", "k"]), int(1));
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "k"]), int(0));
        let hits = h.keyspace.stats.keyspace_hits;
        h.run(&["EXISTS", "k", "missing"]);
        assert_eq!(h.keyspace.stats.keyspace_hits, hits + 1);
    }

    #[test]
    fn type_replies_with_status() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run(&["TYPE", "k"]), Frame::simple("string"));
        assert_eq!(h.run(&["TYPE", "nope"]), Frame::simple("none"));
    }

    #[test]
    fn expire_and_ttl() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run(&["TTL", "nope"]), int(-2));
        assert_eq!(h.run(&["PTTL", "k"]), int(-1));
        assert_eq!(h.run(&["EXPIRETIME", "k"]), int(-1));
        assert_eq!(h.run(&["EXPIRE", "nope", "10"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "10"]), int(1));
        assert_eq!(h.run(&["TTL", "k"]), int(10));
        assert_eq!(h.run(&["PTTL", "k"]), int(10_000));
        assert_eq!(
            h.run(&["PEXPIRETIME", "k"]),
            int((START_MS + 10_000) as i64)
        );
        assert_eq!(
            h.run(&["EXPIRETIME", "k"]),
            int(((START_MS + 10_000) / 1000) as i64)
        );
        h.advance(2_400);
        assert_eq!(h.run(&["TTL", "k"]), int(8), "7.6 s rounds to 8");
        assert_eq!(h.run(&["PTTL", "k"]), int(7_600));
        h.advance(7_600);
        assert_eq!(
            h.run(&["PTTL", "k"]),
            int(0),
            "alive at exactly its expiry time"
        );
        h.advance(1);
        assert_eq!(h.run(&["TTL", "k"]), int(-2));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));

        h.set("p", "v");
        assert_eq!(h.run(&["PEXPIRE", "p", "1500"]), int(1));
        assert_eq!(h.run(&["PTTL", "p"]), int(1_500));
        let at = h.context.now_ms + 5_000;
        assert_eq!(h.run(&["PEXPIREAT", "p", &at.to_string()]), int(1));
        assert_eq!(h.expire_at_in(0, "p"), Some(at));
        let at_seconds = h.context.now_ms / 1000 + 100;
        assert_eq!(h.run(&["EXPIREAT", "p", &at_seconds.to_string()]), int(1));
        assert_eq!(h.expire_at_in(0, "p"), Some(at_seconds * 1000));
        assert_eq!(h.keyspace.db_ref(0).expires_len(), 1);
    }

    #[test]
    fn expire_in_the_past_deletes() {
        let mut h = Harness::new();
        h.set("a", "v");
        h.set("b", "v");
        h.set("c", "v");
        let dirty = h.keyspace.stats.dirty;
        assert_eq!(h.run(&["EXPIRE", "a", "-1"]), int(1));
        assert_eq!(h.get("a"), None);
        assert_eq!(h.keyspace.db_ref(0).len(), 2);
        assert_eq!(h.keyspace.stats.dirty, dirty + 1);
        assert_eq!(h.run(&["PEXPIRE", "b", "0"]), int(1));
        assert_eq!(h.get("b"), None);
        assert_eq!(h.run(&["EXPIREAT", "c", "1"]), int(1));
        assert_eq!(h.run(&["DBSIZE"]), int(0));
    }

    #[test]
    fn expire_conditions() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run(&["EXPIRE", "k", "100", "XX"]), int(0));
        assert_eq!(
            h.run(&["EXPIRE", "k", "100", "GT"]),
            int(0),
            "no TTL is infinite"
        );
        assert_eq!(h.run(&["EXPIRE", "k", "100", "NX"]), int(1));
        assert_eq!(h.run(&["EXPIRE", "k", "200", "NX"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "200", "xx"]), int(1));
        assert_eq!(h.run(&["EXPIRE", "k", "100", "GT"]), int(0));
        assert_eq!(
            h.run(&["EXPIRE", "k", "200", "GT"]),
            int(0),
            "equal is not greater"
        );
        assert_eq!(h.run(&["EXPIRE", "k", "300", "gt"]), int(1));
        assert_eq!(h.run(&["EXPIRE", "k", "400", "LT"]), int(0));
        assert_eq!(h.run(&["EXPIRE", "k", "50", "LT", "XX"]), int(1));
        assert_eq!(h.run(&["TTL", "k"]), int(50));
        h.set("fresh", "v");
        assert_eq!(
            h.run(&["EXPIRE", "fresh", "50", "LT"]),
            int(1),
            "LT passes without a TTL"
        );

        assert_eq!(
            h.run(&["EXPIRE", "k", "1", "NX", "XX"]),
            error(EXPIRE_FLAGS_NX_CONFLICT)
        );
        assert_eq!(
            h.run(&["EXPIRE", "k", "1", "NX", "GT"]),
            error(EXPIRE_FLAGS_NX_CONFLICT)
        );
        assert_eq!(
            h.run(&["EXPIRE", "k", "1", "LT", "NX"]),
            error(EXPIRE_FLAGS_NX_CONFLICT)
        );
        assert_eq!(
            h.run(&["EXPIRE", "k", "1", "GT", "LT"]),
            error(EXPIRE_FLAGS_GT_LT)
        );
        assert_eq!(h.run(&["EXPIRE", "k", "1", "XX", "LT"]), int(1));
        assert_eq!(
            h.run(&["EXPIRE", "k", "1", "FOO"]),
            error("ERR Unsupported option FOO")
        );
        // Options are checked before the time.
        assert_eq!(
            h.run(&["EXPIRE", "k", "abc", "FOO"]),
            error("ERR Unsupported option FOO")
        );
    }

    #[test]
    fn expire_rejects_bad_and_overflowing_times() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run(&["EXPIRE", "k", "1.5"]), error(errors::NOT_INTEGER));
        assert_eq!(
            h.run(&["EXPIRE", "k", "99999999999999999999"]),
            error(errors::NOT_INTEGER)
        );
        assert_eq!(
            h.run(&["EXPIRE", "k", "9223372036854775807"]),
            error("ERR invalid expire time in 'expire' command")
        );
        assert_eq!(
            h.run(&["EXPIRE", "k", "-9223372036854775808"]),
            error("ERR invalid expire time in 'expire' command")
        );
        assert_eq!(
            h.run(&["PEXPIRE", "k", "9223372036854775807"]),
            error("ERR invalid expire time in 'pexpire' command")
        );
        assert_eq!(
            h.run(&["EXPIREAT", "k", "9223372036854776"]),
            error("ERR invalid expire time in 'expireat' command")
        );
        // The largest absolute time is accepted.
        assert_eq!(h.run(&["PEXPIREAT", "k", "9223372036854775807"]), int(1));
        assert_eq!(
            h.run(&["TTL", "k"]),
            int(((i64::MAX as u64 - START_MS + 500) / 1000) as i64)
        );
        assert_eq!(
            h.run(&["EXPIRETIME", "k"]),
            int((i64::MAX as u64 / 1000 + 1) as i64)
        );
        // Very negative relative times just delete.
        assert_eq!(h.run(&["PEXPIRE", "k", "-9223372036854775808"]), int(1));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    }

    #[test]
    fn persist() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run(&["PERSIST", "nope"]), int(0));
        assert_eq!(h.run(&["PERSIST", "k"]), int(0));
        h.run(&["EXPIRE", "k", "100"]);
        assert_eq!(h.run(&["PERSIST", "k"]), int(1));
        assert_eq!(h.run(&["TTL", "k"]), int(-1));
        assert_eq!(h.keyspace.db_ref(0).expires_len(), 0);
    }

    #[test]
    fn rename_and_renamenx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RENAME", "nope", "x"]), error("ERR no such key"));
        assert_eq!(h.run(&["RENAMENX", "nope", "x"]), error("ERR no such key"));
        assert_eq!(h.run(&["RENAME", "nope", "nope"]), error("ERR no such key"));
        h.set("a", "1");
        h.run(&["EXPIRE", "a", "100"]);
        assert_eq!(h.run(&["RENAME", "a", "a"]), Frame::OK);
        assert_eq!(h.run(&["RENAMENX", "a", "a"]), int(0));
        assert_eq!(h.run(&["RENAME", "a", "b"]), Frame::OK);
        assert_eq!(h.get("a"), None);
        assert_eq!(h.get("b"), Some(Value::string("1")));
        assert_eq!(h.run(&["TTL", "b"]), int(100), "the TTL moves with the key");

        h.set("c", "3");
        assert_eq!(h.run(&["RENAMENX", "b", "c"]), int(0));
        assert_eq!(h.run(&["RENAME", "c", "b"]), Frame::OK);
        assert_eq!(h.get("b"), Some(Value::string("3")));
        assert_eq!(
            h.run(&["TTL", "b"]),
            int(-1),
            "the old destination TTL is gone"
        );
        assert_eq!(h.run(&["RENAMENX", "b", "d"]), int(1));
        assert_eq!(h.run(&["DBSIZE"]), int(1));
        assert_eq!(h.keyspace.db_ref(0).expires_len(), 0);
    }

    #[test]
    fn copy_within_and_across_databases() {
        let mut h = Harness::new();
        h.set("src", "hello");
        h.run(&["EXPIRE", "src", "100"]);
        assert_eq!(h.run(&["COPY", "nope", "dst"]), int(0));
        assert_eq!(
            h.run(&["COPY", "src", "src"]),
            error("ERR source and destination objects are the same")
        );
        assert_eq!(h.run(&["COPY", "src", "dst"]), int(1));
        assert_eq!(h.get("dst"), Some(Value::string("hello")));
        assert_eq!(h.run(&["TTL", "dst"]), int(100));
        h.set("other", "x");
        assert_eq!(h.run(&["COPY", "other", "dst"]), int(0));
        assert_eq!(h.run(&["COPY", "other", "dst", "REPLACE"]), int(1));
        assert_eq!(h.get("dst"), Some(Value::string("x")));
        assert_eq!(h.run(&["TTL", "dst"]), int(-1));

        assert_eq!(h.run(&["COPY", "src", "src", "DB", "3"]), int(1));
        assert_eq!(h.run(&["COPY", "src", "src", "db", "3"]), int(0));
        assert_eq!(h.run(&["COPY", "src", "src", "DB", "3", "REPLACE"]), int(1));
        h.context.db = 3;
        assert_eq!(h.get("src"), Some(Value::string("hello")));
        assert_eq!(h.run(&["TTL", "src"]), int(100));
        assert_eq!(h.run(&["DBSIZE"]), int(1));
        h.context.db = 0;

        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "16"]),
            error("ERR DB index is out of range")
        );
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "-1"]),
            error("ERR DB index is out of range")
        );
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "abc"]),
            error(errors::NOT_INTEGER)
        );
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "4294967296"]),
            error(INT_OUT_OF_RANGE)
        );
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB"]),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run(&["COPY", "src", "x", "FOO"]),
            error("ERR syntax error")
        );

        h.context.cluster_mode = true;
        assert_eq!(
            h.run(&["COPY", "src", "x", "DB", "1"]),
            error(COPY_IN_CLUSTER)
        );
        assert_eq!(h.run(&["COPY", "src", "y", "DB", "0"]), int(1));
    }

    #[test]
    fn copy_keeps_encoding_and_is_independent() {
        let mut h = Harness::new();
        h.keyspace.set(
            &mut h.context,
            b"raw",
            Value::String(StringValue::raw(b"abc".to_vec())),
            None,
        );
        assert_eq!(h.run(&["COPY", "raw", "copy"]), int(1));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "copy"]), bulk("raw"));
        h.run(&["DEL", "raw"]);
        assert_eq!(
            h.get("copy"),
            Some(Value::String(StringValue::raw(b"abc".to_vec())))
        );
    }

    #[test]
    fn move_between_databases() {
        let mut h = Harness::new();
        h.set("k", "v");
        h.run(&["PEXPIRE", "k", "5000"]);
        assert_eq!(
            h.run(&["MOVE", "k", "0"]),
            error("ERR source and destination objects are the same")
        );
        assert_eq!(
            h.run(&["MOVE", "k", "16"]),
            error("ERR DB index is out of range")
        );
        assert_eq!(h.run(&["MOVE", "k", "x"]), error(errors::NOT_INTEGER));
        assert_eq!(h.run(&["MOVE", "k", "2147483648"]), error(INT_OUT_OF_RANGE));
        assert_eq!(h.run(&["MOVE", "nope", "1"]), int(0));
        assert_eq!(h.run(&["MOVE", "k", "1"]), int(1));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        assert_eq!(h.keyspace.db_ref(0).expires_len(), 0);
        assert_eq!(h.expire_at_in(1, "k"), Some(START_MS + 5000));

        h.context.db = 1;
        h.set("taken", "one");
        h.context.db = 0;
        h.set("taken", "zero");
        assert_eq!(h.run(&["MOVE", "taken", "1"]), int(0));
        assert_eq!(h.get("taken"), Some(Value::string("zero")));

        h.context.cluster_mode = true;
        assert_eq!(
            h.run(&["MOVE", "taken", "1"]),
            error("ERR MOVE is not allowed in cluster mode")
        );
    }

    #[test]
    fn swapdb() {
        let mut h = Harness::new();
        h.set("zero", "0");
        h.context.db = 5;
        h.set("five", "5");
        h.context.db = 0;
        assert_eq!(h.run(&["SWAPDB", "0", "5"]), Frame::OK);
        assert_eq!(h.run(&["EXISTS", "five"]), int(1));
        assert_eq!(h.run(&["EXISTS", "zero"]), int(0));
        h.context.db = 5;
        assert_eq!(h.run(&["EXISTS", "zero"]), int(1));
        assert_eq!(h.run(&["SWAPDB", "5", "5"]), Frame::OK);
        assert_eq!(
            h.run(&["SWAPDB", "x", "5"]),
            error("ERR invalid first DB index")
        );
        assert_eq!(
            h.run(&["SWAPDB", "0", "x"]),
            error("ERR invalid second DB index")
        );
        assert_eq!(
            h.run(&["SWAPDB", "99999999999", "0"]),
            error("ERR invalid first DB index")
        );
        assert_eq!(
            h.run(&["SWAPDB", "0", "16"]),
            error("ERR DB index is out of range")
        );
        assert_eq!(
            h.run(&["SWAPDB", "-1", "0"]),
            error("ERR DB index is out of range")
        );
        h.context.cluster_mode = true;
        assert_eq!(
            h.run(&["SWAPDB", "0", "1"]),
            error("ERR SWAPDB is not allowed in cluster mode")
        );
    }

    #[test]
    fn flushdb_and_flushall() {
        let mut h = Harness::new();
        h.set("a", "1");
        h.set("b", "2");
        h.context.db = 1;
        h.set("c", "3");
        assert_eq!(h.run(&["FLUSHDB", "NOW"]), error("ERR syntax error"));
        assert_eq!(
            h.run(&["FLUSHDB", "ASYNC", "SYNC"]),
            error("ERR syntax error")
        );
        assert_eq!(h.run(&["FLUSHDB", "sync"]), Frame::OK);
        assert_eq!(h.run(&["DBSIZE"]), int(0));
        h.context.db = 0;
        assert_eq!(h.run(&["DBSIZE"]), int(2));
        h.context.db = 2;
        h.set("d", "4");
        let dirty = h.keyspace.stats.dirty;
        assert_eq!(h.run(&["FLUSHALL", "ASYNC"]), Frame::OK);
        assert_eq!(h.keyspace.stats.dirty, dirty + 4);
        assert!(h.keyspace.dbs().iter().all(|db| db.is_empty()));
        assert_eq!(h.run(&["FLUSHALL"]), Frame::OK);
    }

    #[test]
    fn keys_with_patterns() {
        let mut h = Harness::new();
        for key in ["user:1", "user:2", "user:10", "other", "u"] {
            h.set(key, "v");
        }
        h.set_with_expiry("user:gone", "v", START_MS + 10);
        h.advance(11);
        assert_eq!(
            sorted_keys(h.run(&["KEYS", "*"])),
            vec!["other", "u", "user:1", "user:10", "user:2"]
        );
        assert_eq!(
            sorted_keys(h.run(&["KEYS", "user:?"])),
            vec!["user:1", "user:2"]
        );
        assert_eq!(
            sorted_keys(h.run(&["KEYS", "user:*"])),
            vec!["user:1", "user:10", "user:2"]
        );
        assert_eq!(
            sorted_keys(h.run(&["KEYS", "[ou]*"])),
            vec!["other", "u", "user:1", "user:10", "user:2"]
        );
        assert_eq!(
            sorted_keys(h.run(&["KEYS", "nothing*"])),
            Vec::<String>::new()
        );
    }

    /// Runs a SCAN call, returning the next cursor and the keys.
    fn scan_step(h: &mut Harness, words: &[&str]) -> (u64, Vec<String>) {
        let Frame::Array(parts) = h.run(words) else {
            panic!("not an array");
        };
        let [Frame::Bulk(cursor), keys] = &parts[..] else {
            panic!("bad scan reply {parts:?}");
        };
        let cursor = std::str::from_utf8(cursor).unwrap().parse().unwrap();
        (cursor, sorted_keys(keys.clone()))
    }

    #[test]
    fn scan_returns_every_key_despite_growth() {
        let mut h = Harness::new();
        let originals: BTreeSet<String> = (0..300).map(|index| format!("orig:{index}")).collect();
        for key in &originals {
            h.set(key, "v");
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0u64;
        let mut added = 0;
        loop {
            let (next, keys) = scan_step(&mut h, &["SCAN", &cursor.to_string(), "COUNT", "7"]);
            seen.extend(keys);
            // Grow the table between calls.
            for _ in 0..10 {
                h.set(&format!("new:{added}"), "v");
                added += 1;
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert!(added > 300, "the table grew a lot during the scan");
        for key in &originals {
            assert!(seen.contains(key), "missed {key}");
        }
    }

    #[test]
    fn scan_match_type_and_count() {
        let mut h = Harness::new();
        for index in 0..50 {
            h.set(&format!("a:{index}"), "v");
            h.set(&format!("b:{index}"), "v");
        }
        let mut matched = BTreeSet::new();
        let mut cursor = 0u64;
        loop {
            let (next, keys) = scan_step(
                &mut h,
                &["SCAN", &cursor.to_string(), "MATCH", "a:*", "COUNT", "10"],
            );
            matched.extend(keys);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(matched.len(), 50);
        assert!(matched.iter().all(|key| key.starts_with("a:")));

        // One call with a large COUNT covers the table.
        let (cursor, keys) = scan_step(&mut h, &["SCAN", "0", "COUNT", "1000", "TYPE", "STRING"]);
        assert_eq!((cursor, keys.len()), (0, 100));
        let (cursor, keys) = scan_step(&mut h, &["SCAN", "0", "COUNT", "1000", "TYPE", "list"]);
        assert_eq!((cursor, keys.len()), (0, 0));
        let (_, keys) = scan_step(
            &mut h,
            &["SCAN", "0", "COUNT", "1000", "TYPE", "nosuchtype"],
        );
        assert!(keys.is_empty());
        let (_, keys) = scan_step(&mut h, &["scan", "0", "count", "1000", "match", "*"]);
        assert_eq!(keys.len(), 100);
    }

    #[test]
    fn scan_skips_expired_keys() {
        let mut h = Harness::new();
        h.set("live", "v");
        h.set_with_expiry("dead", "v", START_MS + 1);
        h.advance(2);
        let (cursor, keys) = scan_step(&mut h, &["SCAN", "0", "COUNT", "100"]);
        assert_eq!((cursor, keys), (0, vec!["live".to_string()]));
    }

    #[test]
    fn scan_errors_and_cursors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SCAN", "abc"]), error("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", " 1"]), error("ERR invalid cursor"));
        assert_eq!(h.run(&["SCAN", "1 "]), error("ERR invalid cursor"));
        assert_eq!(
            h.run(&["SCAN", "18446744073709551616"]),
            error("ERR invalid cursor")
        );
        assert_eq!(h.run(&["SCAN", "-"]), error("ERR invalid cursor"));
        assert_eq!(
            h.run(&["SCAN", "0", "COUNT", "0"]),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run(&["SCAN", "0", "COUNT", "-5"]),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run(&["SCAN", "0", "COUNT", "x"]),
            error(errors::NOT_INTEGER)
        );
        assert_eq!(h.run(&["SCAN", "0", "COUNT"]), error("ERR syntax error"));
        assert_eq!(
            h.run(&["SCAN", "0", "FOO", "bar"]),
            error("ERR syntax error")
        );
        assert_eq!(h.run(&["SCAN", "0", "MATCH"]), error("ERR syntax error"));
        let empty = Frame::Array(vec![bulk("0"), Frame::Array(vec![])]);
        assert_eq!(h.run(&["SCAN", "0"]), empty);
        assert_eq!(h.run(&["SCAN", "18446744073709551615"]), empty);
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn randomkey() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["RANDOMKEY"]), Frame::Null);
        for index in 0..20 {
            h.set(&format!("k{index}"), "v");
        }
        let mut seen = BTreeSet::new();
        for _ in 0..400 {
            let Frame::Bulk(key) = h.run(&["RANDOMKEY"]) else {
                panic!("no key");
            };
            seen.insert(key);
        }
        assert_eq!(seen.len(), 20);

        // Only expired keys: they are reclaimed and the answer is null.
        h.run(&["FLUSHDB"]);
        for index in 0..300 {
            h.set_with_expiry(&format!("e{index}"), "v", START_MS + 5);
        }
        h.set_with_expiry("survivor", "v", START_MS + 1_000_000);
        h.advance(10);
        assert_eq!(h.run(&["RANDOMKEY"]), bulk("survivor"));
        h.advance(1_000_000);
        assert_eq!(h.run(&["RANDOMKEY"]), Frame::Null);
        assert_eq!(h.keyspace.db_ref(0).len(), 0);
    }

    #[test]
    fn object_subcommands() {
        let mut h = Harness::new();
        h.set("int", "123");
        h.set("big", "123456");
        h.set("emb", "hello");
        h.set("raw", &"x".repeat(45));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "int"]), bulk("int"));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "emb"]), bulk("embstr"));
        assert_eq!(h.run(&["object", "encoding", "raw"]), bulk("raw"));
        assert_eq!(h.run(&["OBJECT", "ENCODING", "nope"]), Frame::Null);
        assert_eq!(h.run(&["OBJECT", "REFCOUNT", "emb"]), int(1));
        assert_eq!(h.run(&["OBJECT", "REFCOUNT", "int"]), int(i32::MAX as i64));
        assert_eq!(h.run(&["OBJECT", "REFCOUNT", "big"]), int(1));
        assert_eq!(h.run(&["OBJECT", "REFCOUNT", "nope"]), Frame::Null);
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "nope"]), Frame::Null);
        h.advance(5_000);
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "emb"]), int(5));
        assert_eq!(h.run(&["OBJECT", "FREQ", "emb"]), error(NO_LFU));
        assert_eq!(h.run(&["OBJECT", "FREQ", "nope"]), Frame::Null);

        h.keyspace.config.lfu = true;
        h.set("lfu", "v");
        assert_eq!(h.run(&["OBJECT", "FREQ", "lfu"]), int(5));
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "lfu"]), error(NO_LRU));
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "nope"]), Frame::Null);

        assert_eq!(
            h.run(&["OBJECT", "NOPE", "x"]),
            error("ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
        );
        assert_eq!(
            h.run(&["OBJECT", "ENCODING"]),
            error("ERR wrong number of arguments for 'object|encoding' command")
        );
        assert_eq!(
            h.run(&["OBJECT"]),
            error("ERR wrong number of arguments for 'object' command")
        );
        let Frame::Array(help) = h.run(&["OBJECT", "HELP"]) else {
            panic!("help is an array");
        };
        assert_eq!(
            help[0],
            Frame::simple("OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
        );
        assert_eq!(help.last(), Some(&Frame::simple("    Prints this help.")));
        assert_eq!(help.len(), 15);
    }

    #[test]
    fn dump_restore_round_trip() {
        let mut h = Harness::new();
        h.set("k", "some value");
        assert_eq!(h.run(&["DUMP", "nope"]), Frame::Null);
        let Frame::Bulk(payload) = h.run(&["DUMP", "k"]) else {
            panic!("no payload");
        };
        let restore = |key: &str, ttl: &str, extra: &[&str]| -> Vec<Bytes> {
            let mut arguments = vec![
                Bytes::from_static(b"RESTORE"),
                Bytes::copy_from_slice(key.as_bytes()),
            ];
            arguments.push(Bytes::copy_from_slice(ttl.as_bytes()));
            arguments.push(payload.clone());
            arguments.extend(
                extra
                    .iter()
                    .map(|word| Bytes::copy_from_slice(word.as_bytes())),
            );
            arguments
        };

        assert_eq!(
            h.run_arguments(&restore("k", "0", &[])),
            error("BUSYKEY Target key name already exists.")
        );
        assert_eq!(h.run_arguments(&restore("copy", "0", &[])), Frame::OK);
        assert_eq!(h.get("copy"), Some(Value::string("some value")));
        assert_eq!(h.run(&["TTL", "copy"]), int(-1));

        // Relative TTL.
        assert_eq!(
            h.run_arguments(&restore("copy", "5000", &["REPLACE"])),
            Frame::OK
        );
        assert_eq!(h.run(&["PTTL", "copy"]), int(5000));
        // Absolute TTL.
        let at = (START_MS + 60_000).to_string();
        assert_eq!(
            h.run_arguments(&restore("abs", &at, &["ABSTTL"])),
            Frame::OK
        );
        assert_eq!(
            h.run(&["PEXPIRETIME", "abs"]),
            int((START_MS + 60_000) as i64)
        );
        // An absolute TTL in the past: OK, but nothing is created, and REPLACE
        // removes the old key.
        assert_eq!(
            h.run_arguments(&restore("past", "1000", &["ABSTTL"])),
            Frame::OK
        );
        assert_eq!(h.run(&["EXISTS", "past"]), int(0));
        assert_eq!(
            h.run_arguments(&restore("abs", "1000", &["ABSTTL", "REPLACE"])),
            Frame::OK
        );
        assert_eq!(h.run(&["EXISTS", "abs"]), int(0));

        // The restored value dumps to the same payload.
        assert_eq!(h.run(&["DUMP", "copy"]), Frame::Bulk(payload.clone()));

        // Options and errors.
        assert_eq!(
            h.run_arguments(&restore("n", "-1", &[])),
            error("ERR Invalid TTL value, must be >= 0")
        );
        assert_eq!(
            h.run_arguments(&restore("n", "x", &[])),
            error(errors::NOT_INTEGER)
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["FOO"])),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["IDLETIME"])),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["IDLETIME", "-1"])),
            error(INVALID_IDLETIME)
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["FREQ", "256"])),
            error(INVALID_FREQ)
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["FREQ", "-1"])),
            error(INVALID_FREQ)
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["FREQ", "1", "IDLETIME", "1"])),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run_arguments(&restore("n", "0", &["IDLETIME", "1", "FREQ", "1"])),
            error("ERR syntax error")
        );
        assert_eq!(
            h.run_arguments(&restore("n", "9223372036854775807", &[])),
            error("ERR invalid expire time in 'restore' command")
        );
        // BUSYKEY comes before the TTL check.
        assert_eq!(
            h.run_arguments(&restore("k", "-1", &[])),
            error("BUSYKEY Target key name already exists.")
        );
        assert_eq!(h.run(&["EXISTS", "n"]), int(0));

        let mut bad = payload.to_vec();
        bad[1] ^= 1;
        let arguments = vec![
            Bytes::from_static(b"RESTORE"),
            Bytes::from_static(b"n"),
            Bytes::from_static(b"0"),
            Bytes::from(bad),
        ];
        assert_eq!(
            h.run_arguments(&arguments),
            error("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            h.run(&["RESTORE", "n", "0", ""]),
            error("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            h.run(&["RESTORE", "n"]),
            error("ERR wrong number of arguments for 'restore' command")
        );
    }

    #[test]
    fn restore_idletime_and_freq() {
        let mut h = Harness::new();
        h.set("k", "v");
        let Frame::Bulk(payload) = h.run(&["DUMP", "k"]) else {
            panic!("no payload");
        };
        let arguments = |key: &'static str, option: &'static str, value: &'static str| {
            vec![
                Bytes::from_static(b"RESTORE"),
                Bytes::from_static(key.as_bytes()),
                Bytes::from_static(b"0"),
                payload.clone(),
                Bytes::from_static(option.as_bytes()),
                Bytes::from_static(value.as_bytes()),
            ]
        };
        assert_eq!(
            h.run_arguments(&arguments("idle", "IDLETIME", "1000")),
            Frame::OK
        );
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "idle"]), int(1000));
        // FREQ is ignored under an LRU policy.
        assert_eq!(
            h.run_arguments(&arguments("freq", "FREQ", "100")),
            Frame::OK
        );
        assert_eq!(h.run(&["OBJECT", "IDLETIME", "freq"]), int(0));

        h.keyspace.config.lfu = true;
        assert_eq!(h.run_arguments(&arguments("lfu", "FREQ", "100")), Frame::OK);
        assert_eq!(h.run(&["OBJECT", "FREQ", "lfu"]), int(100));
    }

    #[test]
    fn restore_keeps_the_int_encoding() {
        let mut h = Harness::new();
        h.set("n", "12345");
        let Frame::Bulk(payload) = h.run(&["DUMP", "n"]) else {
            panic!("no payload");
        };
        let arguments = vec![
            Bytes::from_static(b"RESTORE"),
            Bytes::from_static(b"m"),
            Bytes::from_static(b"0"),
            payload,
        ];
        assert_eq!(h.run_arguments(&arguments), Frame::OK);
        assert_eq!(h.run(&["OBJECT", "ENCODING", "m"]), bulk("int"));
    }

    #[test]
    fn dirty_counts_changes_only() {
        let mut h = Harness::new();
        h.set("k", "v");
        let start = h.keyspace.stats.dirty;
        h.run(&["EXPIRE", "nope", "10"]);
        h.run(&["PERSIST", "k"]);
        h.run(&["RENAMENX", "k", "k"]);
        h.run(&["EXISTS", "k"]);
        assert_eq!(h.keyspace.stats.dirty, start);
        h.run(&["EXPIRE", "k", "10"]);
        h.run(&["PERSIST", "k"]);
        h.run(&["RENAME", "k", "j"]);
        h.run(&["COPY", "j", "i"]);
        h.run(&["MOVE", "i", "1"]);
        assert_eq!(h.keyspace.stats.dirty, start + 5);
    }

    #[test]
    fn table_rows_match_redis() {
        let spec = |name: &str| crate::commands::lookup(name.as_bytes()).unwrap();
        assert_eq!(spec("del").legacy_key_range(), (1, -1, 1));
        assert_eq!(spec("rename").legacy_key_range(), (1, 2, 1));
        assert_eq!(spec("copy").legacy_key_range(), (1, 2, 1));
        assert_eq!(spec("object").subcommands.len(), 5);
        assert!(spec("restore").is_write());
        assert!(!spec("ttl").is_write());
        assert_eq!(spec("flushall").group, "server");
        assert_eq!(spec("swapdb").group, "server");
        assert_eq!(spec("scan").group, "generic");
        let object = spec("object");
        let encoding = crate::commands::lookup_subcommand(object, b"ENCODING").unwrap();
        assert_eq!(encoding.legacy_key_range(), (2, 2, 1));
    }
}
