//! String commands: the Redis 7.2 string family (GET, SET and its variants, the
//! multi-key forms, the counters, ranges and LCS).
//!
//! Encodings follow Redis so OBJECT ENCODING answers the same: values stored whole
//! (SET, MSET, GETSET, APPEND on a new key) go through the `int`/`embstr`/`raw`
//! choice of [`Value::string`]; in-place edits (APPEND, SETRANGE) leave `raw`
//! strings; INCR-family results are `int`; INCRBYFLOAT stores its formatted result
//! as a plain string (`embstr` when short), as Redis's
//! `createStringObjectFromLongDouble` does.

use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::value::{StringValue, Value};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

/// The complexity note Redis gives GETRANGE and SUBSTR.
const RANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "append",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | INSERT)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Appends a string to the value of a key. Creates the key if it doesn't exist.",
        since: "2.0.0",
        complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
        handler: Handler::Keyspace(append),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "decr",
        arity: 2,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(decr),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "decrby",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(decrby),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "get",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "string", "fast"],
        group: "string",
        summary: "Returns the string value of a key.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(get),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getdel",
        arity: 2,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | DELETE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Returns the string value of a key after deleting the key.",
        since: "6.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(getdel),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getex",
        arity: -2,
        flags: WRITE | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Returns the string value of a key after setting its expiration time.",
        since: "6.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(getex),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getrange",
        arity: 4,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "string", "slow"],
        group: "string",
        summary: "Returns a substring of the string stored at a key.",
        since: "2.4.0",
        complexity: RANGE_COMPLEXITY,
        handler: Handler::Keyspace(getrange),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getset",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Returns the previous string value of a key after setting it to a new value.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(getset),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incr",
        arity: 2,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(incr),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incrby",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(incrby),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "incrbyfloat",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
        since: "2.6.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(incrbyfloat),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lcs",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::range(1, 1, 1, RO | ACCESS)],
        categories: &["read", "string", "slow"],
        group: "string",
        summary: "Finds the longest common substring.",
        since: "7.0.0",
        complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        handler: Handler::Keyspace(lcs),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "mget",
        arity: -2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::range(1, -1, 1, RO | ACCESS)],
        categories: &["read", "string", "fast"],
        tips: &["request_policy:multi_shard"],
        group: "string",
        summary: "Atomically returns the string values of one or more keys.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of keys to retrieve.",
        handler: Handler::Keyspace(mget),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "mset",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::range(1, -1, 2, OW | UPDATE)],
        categories: &["write", "string", "slow"],
        tips: &["request_policy:multi_shard", "response_policy:all_succeeded"],
        group: "string",
        summary: "Atomically creates or modifies the string values of one or more keys.",
        since: "1.0.1",
        complexity: "O(N) where N is the number of keys to set.",
        handler: Handler::Keyspace(mset),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "msetnx",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::range(1, -1, 2, OW | INSERT)],
        categories: &["write", "string", "slow"],
        group: "string",
        summary: "Atomically modifies the string values of one or more keys only when all keys don't exist.",
        since: "1.0.1",
        complexity: "O(N) where N is the number of keys to set.",
        handler: Handler::Keyspace(msetnx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "psetex",
        arity: 4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, OW | UPDATE)],
        categories: &["write", "string", "slow"],
        group: "string",
        summary: "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
        since: "2.6.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(psetex),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | ACCESS | UPDATE | VARIABLE_FLAGS)],
        categories: &["write", "string", "slow"],
        group: "string",
        summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(set),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setex",
        arity: 4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, OW | UPDATE)],
        categories: &["write", "string", "slow"],
        group: "string",
        summary: "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.",
        since: "2.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(setex),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setnx",
        arity: 3,
        flags: WRITE | DENYOOM | FAST,
        key_specs: &[KeySpec::single(1, OW | INSERT)],
        categories: &["write", "string", "fast"],
        group: "string",
        summary: "Set the string value of a key only when the key doesn't exist.",
        since: "1.0.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(setnx),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setrange",
        arity: 4,
        flags: WRITE | DENYOOM,
        key_specs: &[KeySpec::single(1, RW | UPDATE)],
        categories: &["write", "string", "slow"],
        group: "string",
        summary: "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.",
        since: "2.2.0",
        complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
        handler: Handler::Keyspace(setrange),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "strlen",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO)],
        categories: &["read", "string", "fast"],
        group: "string",
        summary: "Returns the length of a string value.",
        since: "2.2.0",
        complexity: "O(1)",
        handler: Handler::Keyspace(strlen),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "substr",
        arity: 4,
        flags: READONLY,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "string", "slow"],
        group: "string",
        summary: "Returns a substring from a string value.",
        since: "1.0.0",
        complexity: RANGE_COMPLEXITY,
        handler: Handler::Keyspace(getrange),
        ..CommandSpec::DEFAULT
    },
];

// ---- Error texts only this family uses ------------------------------------------

const DECREMENT_OVERFLOW: &str = "ERR decrement would overflow";
const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
const LCS_LEN_AND_IDX: &str = "ERR If you want both the length and indexes, please just use IDX.";
const LCS_TOO_LONG: &str = "ERR String too long for LCS";
const LCS_TABLE_TOO_BIG: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
const LCS_ALLOCATION_FAILED: &str =
    "ERR Insufficient memory, failed allocating transient memory for LCS";
/// What a memory-limited Redis answers a `denyoom` command; used when growing a
/// string cannot allocate.
const OUT_OF_MEMORY: &str = "OOM command not allowed when used memory > 'maxmemory'.";

// ---- Shared helpers ---------------------------------------------------------------

/// The string inside `value`, or WRONGTYPE for other types.
fn string_mut(value: &mut Value) -> Result<&mut StringValue, Frame> {
    match value {
        Value::String(string) => Ok(string),
        _ => Err(Frame::error(errors::WRONGTYPE)),
    }
}

/// The string stored at `key`, `Ok(None)` when absent, WRONGTYPE for other types.
/// Counts a keyspace hit or miss (Redis's `lookupKeyRead`).
pub(crate) fn read_string<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut StringValue>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => string_mut(&mut entry.value).map(Some),
    }
}

/// The bytes of the string at `key` for a reply (`lookupKeyRead` + type check).
fn read_bytes(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<Bytes>, Frame> {
    Ok(read_string(keyspace, context, key)?.map(|string| string.to_bytes()))
}

fn bulk_or_null(value: Option<Bytes>) -> Frame {
    value.map_or(Frame::Null, Frame::Bulk)
}

/// Whether `key` is live, deleting it first if it expired (`lookupKeyWrite`).
fn exists_for_write(keyspace: &mut Keyspace, context: &mut Context, key: &[u8]) -> bool {
    keyspace.lookup_write(context, key).is_some()
}

/// Stores a whole new value, replacing value and TTL (`Keyspace::set` counts an
/// expired key it replaces as expired, as Redis's `setKey` lookup does).
fn store(
    keyspace: &mut Keyspace,
    context: &mut Context,
    key: &[u8],
    value: Value,
    expire_at_ms: Option<u64>,
) {
    keyspace.set(context, key, value, expire_at_ms);
}

/// Grows `data` to `length` bytes (zero filled) without aborting on allocation
/// failure.
pub(crate) fn grow_zeroed(data: &mut Vec<u8>, length: usize) -> Result<(), Frame> {
    if length > data.len() {
        data.try_reserve_exact(length - data.len())
            .map_err(|_| Frame::error(OUT_OF_MEMORY))?;
        data.resize(length, 0);
    }
    Ok(())
}

// ---- Expiry options (SET, GETEX, SETEX, PSETEX) -------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    /// `EX seconds`, relative.
    Ex,
    /// `PX milliseconds`, relative.
    Px,
    /// `EXAT unix-seconds`, absolute.
    ExAt,
    /// `PXAT unix-milliseconds`, absolute.
    PxAt,
}

impl ExpireKind {
    fn from_keyword(keyword: &[u8]) -> Option<ExpireKind> {
        [
            ("EX", ExpireKind::Ex),
            ("PX", ExpireKind::Px),
            ("EXAT", ExpireKind::ExAt),
            ("PXAT", ExpireKind::PxAt),
        ]
        .into_iter()
        .find(|(name, _)| args::is_keyword(keyword, name))
        .map(|(_, kind)| kind)
    }

    fn in_seconds(self) -> bool {
        matches!(self, ExpireKind::Ex | ExpireKind::ExAt)
    }

    fn is_relative(self) -> bool {
        matches!(self, ExpireKind::Ex | ExpireKind::Px)
    }
}

/// The absolute expiry time (Unix ms) an expire argument asks for, validated as
/// Redis's `getExpireMillisecondsOrReply`: positive, and no overflow converting
/// seconds or adding the current time.
fn expire_at_ms(
    kind: ExpireKind,
    argument: &[u8],
    now_ms: u64,
    command: &str,
) -> Result<u64, Frame> {
    let given = args::parse_i64(argument)?;
    let invalid = || Frame::error_owned(errors::invalid_expire(command));
    if given <= 0 {
        return Err(invalid());
    }
    let mut milliseconds = if kind.in_seconds() {
        given.checked_mul(1000).ok_or_else(invalid)?
    } else {
        given
    };
    if kind.is_relative() {
        let now = i64::try_from(now_ms).map_err(|_| invalid())?;
        milliseconds = milliseconds.checked_add(now).ok_or_else(invalid)?;
    }
    u64::try_from(milliseconds)
        .ok()
        .filter(|&at| at > 0)
        .ok_or_else(invalid)
}

/// The options of SET (`NX XX GET KEEPTTL EX PX EXAT PXAT`) or GETEX (`PERSIST EX PX
/// EXAT PXAT`).
#[derive(Debug, Default)]
struct ExtendedOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(ExpireKind, &'a [u8])>,
}

/// Parses the options after the fixed arguments exactly as Redis's
/// `parseExtendedStringArgumentsOrReply`: conflicting options are a syntax error,
/// repeating the same option is allowed (the last expire value wins).
fn parse_extended_options(
    arguments: &[Bytes],
    for_set: bool,
) -> Result<ExtendedOptions<'_>, Frame> {
    let mut options = ExtendedOptions::default();
    let mut index = if for_set { 3 } else { 2 };
    while let Some(option) = arguments.get(index) {
        let next = arguments.get(index + 1);
        let current_kind = options.expire.map(|(kind, _)| kind);
        if for_set && args::is_keyword(option, "NX") && !options.xx {
            options.nx = true;
        } else if for_set && args::is_keyword(option, "XX") && !options.nx {
            options.xx = true;
        } else if for_set && args::is_keyword(option, "GET") {
            options.get = true;
        } else if for_set && args::is_keyword(option, "KEEPTTL") && current_kind.is_none() {
            options.keep_ttl = true;
        } else if !for_set
            && args::is_keyword(option, "PERSIST")
            && current_kind.is_none()
            && !options.keep_ttl
        {
            options.persist = true;
        } else if let (Some(kind), Some(value)) = (ExpireKind::from_keyword(option), next) {
            let compatible = !options.keep_ttl
                && !options.persist
                && current_kind.is_none_or(|current| current == kind);
            if !compatible {
                return Err(Frame::error(errors::SYNTAX));
            }
            options.expire = Some((kind, value));
            index += 1;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
        index += 1;
    }
    Ok(options)
}

// ---- GET, SET and friends ---------------------------------------------------------

fn get(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_bytes(keyspace, context, &arguments[1]) {
        Ok(value) => bulk_or_null(value),
        Err(error) => error,
    }
}

/// One SET-family request, as Redis's `setGenericCommand` takes it.
struct SetRequest<'a> {
    key: &'a [u8],
    value: &'a [u8],
    options: ExtendedOptions<'a>,
    /// Command name for the invalid-expire error.
    command: &'static str,
    /// Reply when the value was stored (and GET was not given).
    stored: Frame,
    /// Reply when NX/XX prevented the store (and GET was not given).
    aborted: Frame,
}

fn set_generic(keyspace: &mut Keyspace, context: &mut Context, request: SetRequest<'_>) -> Frame {
    let options = &request.options;
    let expire_at = match options.expire {
        Some((kind, argument)) => {
            match expire_at_ms(kind, argument, context.now_ms, request.command) {
                Ok(at) => Some(at),
                Err(error) => return error,
            }
        }
        None => None,
    };
    let old_value = if options.get {
        match read_bytes(keyspace, context, request.key) {
            Ok(value) => Some(bulk_or_null(value)),
            Err(error) => return error,
        }
    } else {
        None
    };
    // A plain SET needs no lookup: `Keyspace::set` replaces whatever is there. The
    // conditions and KEEPTTL need to know (and so lazily expire) the current key.
    let looked_up = options.nx || options.xx || options.keep_ttl;
    let found = looked_up && exists_for_write(keyspace, context, request.key);
    if (options.nx && found) || (options.xx && !found) {
        return old_value.unwrap_or(request.aborted);
    }
    let value = Value::string(request.value);
    if options.keep_ttl && expire_at.is_none() {
        keyspace.set_keep_ttl(context, request.key, value);
    } else if looked_up {
        // The lookup above counted the access, as Redis's one lookup does.
        keyspace.set_looked_up(context, request.key, value, expire_at);
    } else {
        keyspace.set(context, request.key, value, expire_at);
    }
    old_value.unwrap_or(request.stored)
}

fn set(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let options = match parse_extended_options(arguments, true) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let request = SetRequest {
        key: &arguments[1],
        value: &arguments[2],
        options,
        command: "set",
        stored: Frame::OK,
        aborted: Frame::Null,
    };
    set_generic(keyspace, context, request)
}

fn setnx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let request = SetRequest {
        key: &arguments[1],
        value: &arguments[2],
        options: ExtendedOptions {
            nx: true,
            ..ExtendedOptions::default()
        },
        command: "setnx",
        stored: Frame::Integer(1),
        aborted: Frame::Integer(0),
    };
    set_generic(keyspace, context, request)
}

fn set_with_expire(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    kind: ExpireKind,
    command: &'static str,
) -> Frame {
    let request = SetRequest {
        key: &arguments[1],
        value: &arguments[3],
        options: ExtendedOptions {
            expire: Some((kind, &arguments[2])),
            ..ExtendedOptions::default()
        },
        command,
        stored: Frame::OK,
        aborted: Frame::Null,
    };
    set_generic(keyspace, context, request)
}

fn setex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_with_expire(keyspace, context, arguments, ExpireKind::Ex, "setex")
}

fn psetex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_with_expire(keyspace, context, arguments, ExpireKind::Px, "psetex")
}

fn getset(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let old_value = match read_bytes(keyspace, context, key) {
        Ok(value) => value,
        Err(error) => return error,
    };
    keyspace.set(context, key, Value::string(&arguments[2]), None);
    bulk_or_null(old_value)
}

fn getdel(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    match read_bytes(keyspace, context, key) {
        Ok(Some(value)) => {
            keyspace.delete(context, key);
            Frame::Bulk(value)
        }
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn getex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let options = match parse_extended_options(arguments, false) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let key = &arguments[1];
    let value = match read_bytes(keyspace, context, key) {
        Ok(Some(value)) => value,
        Ok(None) => return Frame::Null,
        Err(error) => return error,
    };
    // As Redis: the expire argument is validated only once the key is known.
    let expire = match options.expire {
        Some((kind, argument)) => match expire_at_ms(kind, argument, context.now_ms, "getex") {
            Ok(at) => Some((kind, at)),
            Err(error) => return error,
        },
        None => None,
    };
    match expire {
        // An absolute time already reached deletes the key.
        Some((kind, at)) if !kind.is_relative() && at <= context.now_ms => {
            keyspace.delete(context, key);
        }
        Some((_, at)) => {
            keyspace.db(context.db).set_expire(key, at);
            keyspace.stats.dirty += 1;
        }
        None if options.persist && keyspace.db(context.db).persist(key) => {
            keyspace.stats.dirty += 1;
        }
        None => {}
    }
    Frame::Bulk(value)
}

// ---- Multi-key ----------------------------------------------------------------------

fn mget(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let values = arguments[1..]
        .iter()
        .map(|key| match keyspace.read(context, key) {
            Some(entry) => match &entry.value {
                Value::String(string) => Frame::Bulk(string.to_bytes()),
                _ => Frame::Null,
            },
            None => Frame::Null,
        })
        .collect();
    Frame::Array(values)
}

fn mset_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    only_if_none_exist: bool,
    command: &str,
) -> Frame {
    let pairs = arguments[1..].chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return Frame::error_owned(errors::wrong_arity(command));
    }
    if only_if_none_exist {
        for pair in pairs.clone() {
            if exists_for_write(keyspace, context, &pair[0]) {
                return Frame::Integer(0);
            }
        }
    }
    for pair in pairs {
        store(keyspace, context, &pair[0], Value::string(&pair[1]), None);
    }
    if only_if_none_exist {
        Frame::Integer(1)
    } else {
        Frame::OK
    }
}

fn mset(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    mset_generic(keyspace, context, arguments, false, "mset")
}

fn msetnx(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    mset_generic(keyspace, context, arguments, true, "msetnx")
}

// ---- APPEND, STRLEN, SETRANGE, GETRANGE ---------------------------------------------

fn append(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let suffix = &arguments[2];
    let max = keyspace.config.max_string_bytes;
    let outcome = keyspace.lookup_write(context, key).map(|entry| {
        let string = string_mut(&mut entry.value)?;
        let total = string
            .len()
            .checked_add(suffix.len())
            .filter(|&total| total <= max)
            .ok_or_else(|| Frame::error(errors::STRING_TOO_LONG))?;
        let data = string.make_raw();
        data.try_reserve_exact(suffix.len())
            .map_err(|_| Frame::error(OUT_OF_MEMORY))?;
        data.extend_from_slice(suffix);
        Ok(total)
    });
    match outcome {
        None => {
            // A new key stores the argument whole (it may even be `int` encoded).
            keyspace.set(context, key, Value::string(suffix), None);
            Frame::Integer(suffix.len() as i64)
        }
        Some(Ok(total)) => {
            keyspace.stats.dirty += 1;
            Frame::Integer(total as i64)
        }
        Some(Err(error)) => error,
    }
}

fn strlen(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => Frame::Integer(string.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn setrange(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let patch = &arguments[3];
    let offset = match args::parse_i64(&arguments[2]) {
        Ok(offset) if offset < 0 => return Frame::error(errors::OFFSET_OUT_OF_RANGE),
        Ok(offset) => offset,
        Err(error) => return error,
    };
    // Past usize (never on 64-bit targets) is simply too long.
    let Ok(offset) = usize::try_from(offset) else {
        return Frame::error(errors::STRING_TOO_LONG);
    };
    let max = keyspace.config.max_string_bytes;
    let check = |existing: usize| {
        existing
            .checked_add(patch.len())
            .filter(|&total| total <= max)
            .ok_or_else(|| Frame::error(errors::STRING_TOO_LONG))
    };
    let outcome = keyspace.lookup_write(context, key).map(|entry| {
        let string = string_mut(&mut entry.value)?;
        if patch.is_empty() {
            // Nothing to write: answer the current length, change nothing.
            return Ok((string.len(), false));
        }
        let end = check(offset)?;
        let data = string.make_raw();
        grow_zeroed(data, end)?;
        if let Some(target) = data.get_mut(offset..end) {
            target.copy_from_slice(patch);
        }
        Ok((data.len(), true))
    });
    match outcome {
        None => {
            if patch.is_empty() {
                return Frame::Integer(0);
            }
            let end = match check(offset) {
                Ok(end) => end,
                Err(error) => return error,
            };
            let mut data = Vec::new();
            if let Err(error) = grow_zeroed(&mut data, end) {
                return error;
            }
            if let Some(target) = data.get_mut(offset..end) {
                target.copy_from_slice(patch);
            }
            keyspace.set(context, key, Value::String(StringValue::raw(data)), None);
            Frame::Integer(end as i64)
        }
        Some(Ok((length, modified))) => {
            if modified {
                keyspace.stats.dirty += 1;
            }
            Frame::Integer(length as i64)
        }
        Some(Err(error)) => error,
    }
}

/// The byte range GETRANGE returns for `start..=end` over `length` bytes, with
/// Redis's handling of negative and out-of-range indexes.
fn substring_range(start: i64, end: i64, length: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let length = i64::try_from(length).ok()?;
    let resolve = |index: i64| {
        if index < 0 {
            length.saturating_add(index).max(0)
        } else {
            index
        }
    };
    let start = resolve(start);
    let end = resolve(end).min(length - 1);
    if start > end || length == 0 {
        return None;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

fn getrange(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let (start, end) = match (
        args::parse_i64(&arguments[2]),
        args::parse_i64(&arguments[3]),
    ) {
        (Ok(start), Ok(end)) => (start, end),
        (Err(error), _) | (_, Err(error)) => return error,
    };
    let string = match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => string,
        Ok(None) => return Frame::Bulk(Bytes::new()),
        Err(error) => return error,
    };
    let data = string.as_cow();
    let slice =
        substring_range(start, end, data.len()).and_then(|(first, last)| data.get(first..=last));
    Frame::Bulk(slice.map_or_else(Bytes::new, Bytes::copy_from_slice))
}

// ---- Counters -------------------------------------------------------------------------

fn incr_decr(keyspace: &mut Keyspace, context: &mut Context, key: &[u8], delta: i64) -> Frame {
    let outcome = keyspace.lookup_write(context, key).map(|entry| {
        let string = string_mut(&mut entry.value)?;
        let current = string
            .as_i64()
            .ok_or_else(|| Frame::error(errors::NOT_INTEGER))?;
        let next = current
            .checked_add(delta)
            .ok_or_else(|| Frame::error(errors::OVERFLOW))?;
        // In place: the TTL stays, the encoding becomes `int`.
        *string = StringValue::Int(next);
        Ok(next)
    });
    match outcome {
        None => {
            keyspace.set(context, key, Value::String(StringValue::Int(delta)), None);
            Frame::Integer(delta)
        }
        Some(Ok(next)) => {
            keyspace.stats.dirty += 1;
            Frame::Integer(next)
        }
        Some(Err(error)) => error,
    }
}

fn incr(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    incr_decr(keyspace, context, &arguments[1], 1)
}

fn decr(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    incr_decr(keyspace, context, &arguments[1], -1)
}

fn incrby(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match args::parse_i64(&arguments[2]) {
        Ok(increment) => incr_decr(keyspace, context, &arguments[1], increment),
        Err(error) => error,
    }
}

fn decrby(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match args::parse_i64(&arguments[2]) {
        Ok(decrement) => match decrement.checked_neg() {
            Some(delta) => incr_decr(keyspace, context, &arguments[1], delta),
            None => Frame::error(DECREMENT_OVERFLOW),
        },
        Err(error) => error,
    }
}

fn incrbyfloat(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    use long_double::LongDouble;

    let key = &arguments[1];
    let not_float = || Frame::error(errors::NOT_FLOAT);
    let increment = &arguments[2];
    let outcome = keyspace.lookup_write(context, key).map(|entry| {
        let string = string_mut(&mut entry.value)?;
        let current = match &*string {
            StringValue::Int(integer) => LongDouble::from_i64(*integer),
            other => LongDouble::parse(&other.as_cow()).ok_or_else(not_float)?,
        };
        let increment = LongDouble::parse(increment).ok_or_else(not_float)?;
        let text = current
            .add(increment)
            .map(LongDouble::to_human_string)
            .ok_or_else(|| Frame::error(errors::NAN_OR_INFINITY))?;
        // In place: the TTL stays; the result is a plain (not `int`) string.
        *string = float_result(&text);
        Ok(text)
    });
    let text = match outcome {
        None => {
            let Some(increment) = LongDouble::parse(increment) else {
                return not_float();
            };
            let Some(text) = LongDouble::zero()
                .add(increment)
                .map(LongDouble::to_human_string)
            else {
                return Frame::error(errors::NAN_OR_INFINITY);
            };
            keyspace.set(context, key, Value::String(float_result(&text)), None);
            text
        }
        Some(Ok(text)) => {
            keyspace.stats.dirty += 1;
            text
        }
        Some(Err(error)) => return error,
    };
    Frame::Bulk(Bytes::from(text))
}

/// INCRBYFLOAT's stored result: a string object, never `int` encoded.
fn float_result(text: &str) -> StringValue {
    StringValue::embedded(text.as_bytes())
}

// ---- LCS ------------------------------------------------------------------------------

fn lcs(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // Both keys are looked up before either type is checked, as Redis does.
    let first = read_bytes(keyspace, context, &arguments[1]);
    let second = read_bytes(keyspace, context, &arguments[2]);
    let (Ok(first), Ok(second)) = (first, second) else {
        return Frame::error(LCS_NOT_STRINGS);
    };
    let first = first.unwrap_or_default();
    let second = second.unwrap_or_default();

    let mut want_len = false;
    let mut want_idx = false;
    let mut with_match_len = false;
    let mut min_match_len: i64 = 0;
    let mut index = 3;
    while let Some(option) = arguments.get(index) {
        if args::is_keyword(option, "IDX") {
            want_idx = true;
        } else if args::is_keyword(option, "LEN") {
            want_len = true;
        } else if args::is_keyword(option, "WITHMATCHLEN") {
            with_match_len = true;
        } else if let (true, Some(value)) = (
            args::is_keyword(option, "MINMATCHLEN"),
            arguments.get(index + 1),
        ) {
            match args::parse_i64(value) {
                Ok(value) => min_match_len = value.max(0),
                Err(error) => return error,
            }
            index += 1;
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 1;
    }
    if want_len && want_idx {
        return Frame::error(LCS_LEN_AND_IDX);
    }
    let limit = (u32::MAX - 1) as usize;
    if first.len() >= limit || second.len() >= limit {
        return Frame::error(LCS_TOO_LONG);
    }
    let table_bytes = (first.len() as u128 + 1) * (second.len() as u128 + 1) * 4;
    if table_bytes > keyspace.config.max_string_bytes as u128 {
        return Frame::error(LCS_TABLE_TOO_BIG);
    }
    let Some(table) = LcsTable::build(&first, &second) else {
        return Frame::error(LCS_ALLOCATION_FAILED);
    };
    let total = table.at(first.len(), second.len());
    if want_len {
        return Frame::Integer(total as i64);
    }
    let (common, matches) = table.backtrack(&first, &second, min_match_len, with_match_len);
    if want_idx {
        Frame::Map(vec![
            (Frame::bulk("matches"), Frame::Array(matches)),
            (Frame::bulk("len"), Frame::Integer(total as i64)),
        ])
    } else {
        Frame::Bulk(Bytes::from(common))
    }
}

/// The dynamic-programming table: `at(i, j)` is the LCS length of the first `i`
/// bytes of one string and the first `j` of the other.
struct LcsTable {
    cells: Vec<u32>,
    width: usize,
}

impl LcsTable {
    fn build(first: &[u8], second: &[u8]) -> Option<LcsTable> {
        let width = second.len() + 1;
        let size = (first.len() + 1).checked_mul(width)?;
        let mut cells = Vec::new();
        cells.try_reserve_exact(size).ok()?;
        cells.resize(size, 0u32);
        let mut table = LcsTable { cells, width };
        for (i, &first_byte) in first.iter().enumerate() {
            for (j, &second_byte) in second.iter().enumerate() {
                let value = if first_byte == second_byte {
                    table.at(i, j) + 1
                } else {
                    table.at(i, j + 1).max(table.at(i + 1, j))
                };
                if let Some(cell) = table.cells.get_mut((i + 1) * width + j + 1) {
                    *cell = value;
                }
            }
        }
        Some(table)
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells.get(i * self.width + j).copied().unwrap_or(0)
    }

    /// Walks the table back from the end, as Redis does, collecting the common
    /// subsequence and the matching ranges (last ones first).
    fn backtrack(
        &self,
        first: &[u8],
        second: &[u8],
        min_match_len: i64,
        with_match_len: bool,
    ) -> (Vec<u8>, Vec<Frame>) {
        let total = self.at(first.len(), second.len()) as usize;
        let mut common = vec![0u8; total];
        let mut remaining = total;
        let mut matches = Vec::new();
        // A range is "open" while `range` is Some: (a_start, a_end, b_start, b_end).
        let mut range: Option<(usize, usize, usize, usize)> = None;
        let (mut i, mut j) = (first.len(), second.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            let byte = first[i - 1];
            if byte == second[j - 1] {
                // Each diagonal step consumes one byte of the subsequence.
                remaining = remaining.saturating_sub(1);
                if let Some(slot) = common.get_mut(remaining) {
                    *slot = byte;
                }
                match &mut range {
                    None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                    Some((a_start, _, b_start, _)) => {
                        if *a_start == i && *b_start == j {
                            *a_start -= 1;
                            *b_start -= 1;
                        } else {
                            emit = true;
                        }
                    }
                }
                if let Some((a_start, _, b_start, _)) = range {
                    if a_start == 0 || b_start == 0 {
                        emit = true;
                    }
                }
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                if range.is_some() {
                    emit = true;
                }
            }
            if emit {
                if let Some((a_start, a_end, b_start, b_end)) = range.take() {
                    let match_len = (a_end - a_start + 1) as i64;
                    if min_match_len == 0 || match_len >= min_match_len {
                        let mut item = vec![
                            Frame::Array(vec![
                                Frame::Integer(a_start as i64),
                                Frame::Integer(a_end as i64),
                            ]),
                            Frame::Array(vec![
                                Frame::Integer(b_start as i64),
                                Frame::Integer(b_end as i64),
                            ]),
                        ];
                        if with_match_len {
                            item.push(Frame::Integer(match_len));
                        }
                        matches.push(Frame::Array(item));
                    }
                }
            }
        }
        (common, matches)
    }
}

// ---- x87 long double arithmetic for INCRBYFLOAT ------------------------------------------

/// Exact emulation of the 80-bit x87 `long double` Redis uses for INCRBYFLOAT on
/// x86-64: `strtold` parsing (correctly rounded, decimal and hex forms),
/// round-to-nearest-even addition with a 64-bit significand, and `%.17Lf`
/// formatting with trailing zeros removed (`ld2string` in human mode). Plain `f64`
/// would answer `10.59999999999999964` where Redis answers `10.6`.
pub(crate) mod long_double {
    use std::cmp::Ordering;

    /// Redis's MAX_LONG_DOUBLE_CHARS: longer inputs are not floats.
    const MAX_CHARS: usize = 5 * 1024;
    /// Significand bits (the integer bit is explicit).
    const PRECISION: i64 = 64;
    /// Exponent of the least significant significand bit of subnormals and of the
    /// smallest normal number (2^-16382 = 2^63 * 2^-16445).
    const MIN_EXPONENT: i64 = -16445;
    /// Largest exponent of the least significant bit of a finite number.
    const MAX_EXPONENT: i64 = 16320;
    /// Exponents beyond this (decimal or binary) are certainly out of range for any
    /// input that fits MAX_CHARS; clamping keeps the arithmetic small.
    const EXPONENT_CLAMP: i64 = 1_000_000;

    /// A long double: finite (`mantissa * 2^exponent`, zero when the mantissa is
    /// zero) or infinite.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum LongDouble {
        Finite {
            negative: bool,
            mantissa: u64,
            exponent: i64,
        },
        Infinite {
            negative: bool,
        },
    }

    enum Rounded {
        Value(LongDouble),
        Overflow,
        Underflow,
    }

    impl LongDouble {
        pub fn zero() -> LongDouble {
            LongDouble::Finite {
                negative: false,
                mantissa: 0,
                exponent: 0,
            }
        }

        /// The exact value of an integer (64 significand bits hold every i64).
        pub fn from_i64(value: i64) -> LongDouble {
            let magnitude = Big::from_u128(value.unsigned_abs() as u128);
            match round(value < 0, &magnitude, 0, false) {
                Rounded::Value(result) => result,
                Rounded::Overflow | Rounded::Underflow => LongDouble::zero(),
            }
        }

        /// Parses `text` as Redis's `string2ld`: the whole text must be what
        /// `strtold` reads, with no leading space; NaN, overflow and underflow to
        /// zero are refused.
        pub fn parse(text: &[u8]) -> Option<LongDouble> {
            if text.is_empty() || text.len() >= MAX_CHARS {
                return None;
            }
            let (negative, body) = match text.split_first()? {
                (b'-', rest) => (true, rest),
                (b'+', rest) => (false, rest),
                _ => (false, text),
            };
            if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
                return Some(LongDouble::Infinite { negative });
            }
            let hex_body = match body {
                [b'0', b'x' | b'X', rest @ ..] => Some(rest),
                _ => None,
            };
            let rounded = match hex_body {
                Some(rest) => parse_hex(negative, rest)?,
                None => parse_decimal(negative, body)?,
            };
            match rounded {
                Rounded::Value(value) => Some(value),
                Rounded::Overflow | Rounded::Underflow => None,
            }
        }

        /// The correctly rounded sum; `None` when it is infinite or NaN.
        pub fn add(self, other: LongDouble) -> Option<LongDouble> {
            let (
                LongDouble::Finite {
                    negative: a_negative,
                    mantissa: a_mantissa,
                    exponent: a_exponent,
                },
                LongDouble::Finite {
                    negative: b_negative,
                    mantissa: b_mantissa,
                    exponent: b_exponent,
                },
            ) = (self, other)
            else {
                return None;
            };
            if a_mantissa == 0 && b_mantissa == 0 {
                return Some(LongDouble::Finite {
                    negative: a_negative && b_negative,
                    mantissa: 0,
                    exponent: 0,
                });
            }
            if a_mantissa == 0 {
                return Some(other);
            }
            if b_mantissa == 0 {
                return Some(self);
            }
            // Both exact at the smaller exponent; the sum is exact, then rounded once.
            let exponent = a_exponent.min(b_exponent);
            let a = Big::from_u128(a_mantissa as u128).shl((a_exponent - exponent) as u64);
            let b = Big::from_u128(b_mantissa as u128).shl((b_exponent - exponent) as u64);
            let (negative, magnitude) = if a_negative == b_negative {
                (a_negative, a.add(&b))
            } else {
                match a.cmp(&b) {
                    Ordering::Equal => return Some(LongDouble::zero()),
                    Ordering::Greater => (a_negative, a.sub(&b)),
                    Ordering::Less => (b_negative, b.sub(&a)),
                }
            };
            match round(negative, &magnitude, exponent, false) {
                Rounded::Value(value) => Some(value),
                Rounded::Overflow => None,
                Rounded::Underflow => Some(LongDouble::zero()),
            }
        }

        /// The correctly rounded product with a small integer; infinite when it
        /// overflows (as `long double` multiplication).
        pub fn mul_small(self, factor: u32) -> LongDouble {
            let LongDouble::Finite {
                negative,
                mantissa,
                exponent,
            } = self
            else {
                return self;
            };
            let product = Big::from_u128(mantissa as u128 * factor as u128);
            match round(negative, &product, exponent, false) {
                Rounded::Value(value) => value,
                Rounded::Overflow => LongDouble::Infinite { negative },
                Rounded::Underflow => LongDouble::zero(),
            }
        }

        /// The smallest integer not below the value (`ceill`), when it fits an
        /// `i64`. Values beyond `i64::MAX` give `None`; values below `i64::MIN`
        /// give `i64::MIN` (what converting such a `long double` yields on x86-64).
        pub fn ceil_i64(self) -> Option<i64> {
            let (negative, mantissa, exponent) = match self {
                LongDouble::Infinite { negative: true } => return Some(i64::MIN),
                LongDouble::Infinite { negative: false } => return None,
                LongDouble::Finite {
                    negative,
                    mantissa,
                    exponent,
                } => (negative, mantissa as u128, exponent),
            };
            let (whole, fraction) = if exponent >= 64 {
                (u128::MAX, false)
            } else if exponent >= 0 {
                (mantissa << exponent, false)
            } else if exponent <= -128 {
                (0, mantissa != 0)
            } else {
                let shift = exponent.unsigned_abs();
                (mantissa >> shift, mantissa & ((1u128 << shift) - 1) != 0)
            };
            if negative {
                // Rounding up moves toward zero.
                let magnitude = i128::try_from(whole).unwrap_or(i128::MAX);
                return Some(i64::try_from(-magnitude).unwrap_or(i64::MIN));
            }
            let rounded = whole.saturating_add(u128::from(fraction));
            i64::try_from(rounded).ok()
        }

        /// `%.17Lf` with trailing zeros (and a bare point) removed, `-0` as `0`.
        pub fn to_human_string(self) -> String {
            let (negative, mantissa, exponent) = match self {
                LongDouble::Finite {
                    negative,
                    mantissa,
                    exponent,
                } => (negative, mantissa, exponent),
                LongDouble::Infinite { negative } => {
                    return if negative { "-inf" } else { "inf" }.to_string()
                }
            };
            let mut text = String::new();
            if negative {
                text.push('-');
            }
            if exponent >= 0 {
                // An integer: no fraction digits survive the trimming.
                text.push_str(
                    &Big::from_u128(mantissa as u128)
                        .shl(exponent as u64)
                        .to_decimal(),
                );
            } else {
                const SCALE: u128 = 100_000_000_000_000_000; // 10^17
                let shift = exponent.unsigned_abs();
                let scaled = mantissa as u128 * SCALE; // < 2^121
                let rounded = if shift >= 128 {
                    0 // below half a unit of the 17th decimal
                } else {
                    let quotient = scaled >> shift;
                    let remainder = scaled & ((1u128 << shift) - 1);
                    let half = 1u128 << (shift - 1);
                    if remainder > half || (remainder == half && quotient & 1 == 1) {
                        quotient + 1
                    } else {
                        quotient
                    }
                };
                let fraction = format!("{:017}", rounded % SCALE);
                text.push_str(&(rounded / SCALE).to_string());
                let fraction = fraction.trim_end_matches('0');
                if !fraction.is_empty() {
                    text.push('.');
                    text.push_str(fraction);
                }
            }
            if text == "-0" {
                text = "0".to_string();
            }
            text
        }
    }

    /// Rounds `(magnitude + sticky) * 2^exp2` to the nearest long double (ties to
    /// even), where `sticky` stands for a nonzero tail below the last bit of
    /// `magnitude`. Callers passing `sticky` supply at least 66 significant bits.
    fn round(negative: bool, magnitude: &Big, exp2: i64, sticky: bool) -> Rounded {
        if magnitude.is_zero() {
            return if sticky {
                Rounded::Underflow
            } else {
                Rounded::Value(LongDouble::Finite {
                    negative,
                    mantissa: 0,
                    exponent: 0,
                })
            };
        }
        let bits = magnitude.bit_len() as i64;
        let mut exponent = (bits + exp2 - PRECISION).max(MIN_EXPONENT);
        let shift = exponent - exp2;
        let mut mantissa = if shift <= 0 {
            // Exact: at most 64 bits after the shift.
            magnitude.low_u128() << shift.unsigned_abs()
        } else {
            let shift = shift as u64;
            let quotient = magnitude.shr(shift).low_u128();
            let half = magnitude.bit(shift - 1);
            let rest = sticky || magnitude.any_below(shift - 1);
            if half && (rest || quotient & 1 == 1) {
                quotient + 1
            } else {
                quotient
            }
        };
        if mantissa >> PRECISION != 0 {
            mantissa >>= 1;
            exponent += 1;
        }
        if mantissa == 0 {
            return Rounded::Underflow;
        }
        if exponent > MAX_EXPONENT {
            return Rounded::Overflow;
        }
        Rounded::Value(LongDouble::Finite {
            negative,
            mantissa: mantissa as u64,
            exponent,
        })
    }

    /// Reads an optionally signed decimal exponent: all of `text` must be digits.
    fn parse_exponent(text: &[u8]) -> Option<i64> {
        let (negative, digits) = match text.split_first()? {
            (b'-', rest) => (true, rest),
            (b'+', rest) => (false, rest),
            _ => (false, text),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let magnitude = digits.iter().fold(0i64, |acc, &digit| {
            (acc * 10 + (digit - b'0') as i64).min(EXPONENT_CLAMP)
        });
        Some(if negative { -magnitude } else { magnitude })
    }

    /// `digits[.digits][(e|E)[sign]digits]`, correctly rounded.
    fn parse_decimal(negative: bool, text: &[u8]) -> Option<Rounded> {
        let mantissa_end = text
            .iter()
            .position(|&byte| byte == b'e' || byte == b'E')
            .unwrap_or(text.len());
        let (mantissa_text, exponent_text) = text.split_at(mantissa_end);
        let mut exponent = match exponent_text.split_first() {
            Some((_, rest)) => parse_exponent(rest)?,
            None => 0,
        };
        let mut digits = Big::default();
        let mut digit_count = 0usize;
        let mut significant_digits: i64 = 0;
        let mut seen_point = false;
        for &byte in mantissa_text {
            match byte {
                b'.' if !seen_point => seen_point = true,
                b'0'..=b'9' => {
                    digit_count += 1;
                    if seen_point {
                        exponent -= 1;
                    }
                    if byte != b'0' || !digits.is_zero() {
                        digits.mul_add_small(10, (byte - b'0') as u32);
                        significant_digits += 1;
                    }
                }
                _ => return None,
            }
        }
        if digit_count == 0 {
            return None;
        }
        if digits.is_zero() {
            return Some(Rounded::Value(LongDouble::Finite {
                negative,
                mantissa: 0,
                exponent: 0,
            }));
        }
        // The value lies in [10^(magnitude-1), 10^magnitude).
        let magnitude = significant_digits + exponent;
        if magnitude > 4940 {
            return Some(Rounded::Overflow);
        }
        if magnitude < -4960 {
            return Some(Rounded::Underflow);
        }
        if exponent >= 0 {
            let value = digits.mul(&Big::pow10(exponent as u64));
            return Some(round(negative, &value, 0, false));
        }
        // digits / 10^-exponent with enough quotient bits (67 or 68) to round.
        let divisor = Big::pow10(exponent.unsigned_abs());
        let scale = divisor.bit_len() as i64 - digits.bit_len() as i64 + 67;
        let (numerator, denominator) = if scale >= 0 {
            (digits.shl(scale as u64), divisor)
        } else {
            (digits, divisor.shl(scale.unsigned_abs()))
        };
        let (quotient, inexact) = numerator.div_small_quotient(&denominator);
        Some(round(negative, &Big::from_u128(quotient), -scale, inexact))
    }

    /// `hexdigits[.hexdigits][(p|P)[sign]digits]` after `0x`, correctly rounded.
    fn parse_hex(negative: bool, text: &[u8]) -> Option<Rounded> {
        let mantissa_end = text
            .iter()
            .position(|&byte| byte == b'p' || byte == b'P')
            .unwrap_or(text.len());
        let (mantissa_text, exponent_text) = text.split_at(mantissa_end);
        let mut exponent = match exponent_text.split_first() {
            Some((_, rest)) => parse_exponent(rest)?,
            None => 0,
        };
        let mut digits = Big::default();
        let mut digit_count = 0usize;
        let mut seen_point = false;
        for &byte in mantissa_text {
            if byte == b'.' && !seen_point {
                seen_point = true;
                continue;
            }
            let value = (byte as char).to_digit(16)?;
            digit_count += 1;
            if seen_point {
                exponent -= 4;
            }
            digits.mul_add_small(16, value);
        }
        if digit_count == 0 {
            return None;
        }
        if digits.is_zero() {
            return Some(Rounded::Value(LongDouble::Finite {
                negative,
                mantissa: 0,
                exponent: 0,
            }));
        }
        // The value lies in [2^(top-1), 2^top).
        let top = digits.bit_len() as i64 + exponent;
        if top > 16400 {
            return Some(Rounded::Overflow);
        }
        if top < -16460 {
            return Some(Rounded::Underflow);
        }
        Some(round(negative, &digits, exponent, false))
    }

    /// A non-negative arbitrary-precision integer: little-endian 32-bit limbs, no
    /// high zero limbs.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    struct Big {
        limbs: Vec<u32>,
    }

    impl Big {
        fn from_u128(mut value: u128) -> Big {
            let mut limbs = Vec::new();
            while value != 0 {
                limbs.push(value as u32);
                value >>= 32;
            }
            Big { limbs }
        }

        fn pow10(exponent: u64) -> Big {
            let mut value = Big::from_u128(1);
            let mut left = exponent;
            while left >= 9 {
                value.mul_add_small(1_000_000_000, 0);
                left -= 9;
            }
            value.mul_add_small(10u32.pow(left as u32), 0);
            value
        }

        fn trim(&mut self) {
            while self.limbs.last() == Some(&0) {
                self.limbs.pop();
            }
        }

        fn is_zero(&self) -> bool {
            self.limbs.is_empty()
        }

        fn bit_len(&self) -> u64 {
            match self.limbs.last() {
                None => 0,
                Some(&top) => {
                    (self.limbs.len() as u64 - 1) * 32 + (32 - top.leading_zeros() as u64)
                }
            }
        }

        fn bit(&self, index: u64) -> bool {
            usize::try_from(index / 32)
                .ok()
                .and_then(|limb| self.limbs.get(limb))
                .is_some_and(|&limb| (limb >> (index % 32)) & 1 == 1)
        }

        /// Whether any bit below `index` is set.
        fn any_below(&self, index: u64) -> bool {
            let full = usize::try_from(index / 32).unwrap_or(usize::MAX);
            let partial = (index % 32) as u32;
            if self.limbs.iter().take(full).any(|&limb| limb != 0) {
                return true;
            }
            partial != 0
                && self
                    .limbs
                    .get(full)
                    .is_some_and(|&limb| limb & ((1u32 << partial) - 1) != 0)
        }

        /// The low 128 bits.
        fn low_u128(&self) -> u128 {
            self.limbs
                .iter()
                .take(4)
                .rev()
                .fold(0u128, |acc, &limb| (acc << 32) | limb as u128)
        }

        fn shl(&self, bits: u64) -> Big {
            if self.is_zero() {
                return Big::default();
            }
            let limb_shift = (bits / 32) as usize;
            let bit_shift = (bits % 32) as u32;
            let mut limbs = vec![0u32; limb_shift];
            limbs.reserve(self.limbs.len() + 1);
            if bit_shift == 0 {
                limbs.extend_from_slice(&self.limbs);
            } else {
                let mut carry = 0u32;
                for &limb in &self.limbs {
                    limbs.push((limb << bit_shift) | carry);
                    carry = limb >> (32 - bit_shift);
                }
                if carry != 0 {
                    limbs.push(carry);
                }
            }
            Big { limbs }
        }

        fn shr(&self, bits: u64) -> Big {
            let Some(source) = usize::try_from(bits / 32)
                .ok()
                .and_then(|skip| self.limbs.get(skip..))
            else {
                return Big::default();
            };
            let bit_shift = (bits % 32) as u32;
            let mut limbs: Vec<u32> = if bit_shift == 0 {
                source.to_vec()
            } else {
                source
                    .iter()
                    .enumerate()
                    .map(|(index, &limb)| {
                        let high = source
                            .get(index + 1)
                            .map_or(0, |&next| next << (32 - bit_shift));
                        (limb >> bit_shift) | high
                    })
                    .collect()
            };
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
            Big { limbs }
        }

        fn mul_add_small(&mut self, factor: u32, addend: u32) {
            let mut carry = addend as u64;
            for limb in &mut self.limbs {
                let value = *limb as u64 * factor as u64 + carry;
                *limb = value as u32;
                carry = value >> 32;
            }
            if carry != 0 {
                self.limbs.push(carry as u32);
            }
            self.trim();
        }

        fn mul(&self, other: &Big) -> Big {
            let mut limbs = vec![0u32; self.limbs.len() + other.limbs.len()];
            for (i, &a) in self.limbs.iter().enumerate() {
                let mut carry = 0u64;
                for (j, &b) in other.limbs.iter().enumerate() {
                    let slot = &mut limbs[i + j];
                    let value = a as u64 * b as u64 + *slot as u64 + carry;
                    *slot = value as u32;
                    carry = value >> 32;
                }
                limbs[i + other.limbs.len()] = carry as u32;
            }
            let mut result = Big { limbs };
            result.trim();
            result
        }

        fn add(&self, other: &Big) -> Big {
            let (long, short) = if self.limbs.len() >= other.limbs.len() {
                (self, other)
            } else {
                (other, self)
            };
            let mut limbs = Vec::with_capacity(long.limbs.len() + 1);
            let mut carry = 0u64;
            for (index, &limb) in long.limbs.iter().enumerate() {
                let value =
                    limb as u64 + short.limbs.get(index).copied().unwrap_or(0) as u64 + carry;
                limbs.push(value as u32);
                carry = value >> 32;
            }
            if carry != 0 {
                limbs.push(carry as u32);
            }
            Big { limbs }
        }

        /// `self - other`, for `self >= other`.
        fn sub(&self, other: &Big) -> Big {
            let mut limbs = Vec::with_capacity(self.limbs.len());
            let mut borrow = 0i64;
            for (index, &limb) in self.limbs.iter().enumerate() {
                let mut value =
                    limb as i64 - other.limbs.get(index).copied().unwrap_or(0) as i64 - borrow;
                borrow = 0;
                if value < 0 {
                    value += 1 << 32;
                    borrow = 1;
                }
                limbs.push(value as u32);
            }
            let mut result = Big { limbs };
            result.trim();
            result
        }

        fn cmp(&self, other: &Big) -> Ordering {
            self.limbs
                .len()
                .cmp(&other.limbs.len())
                .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
        }

        /// `(floor(self / divisor), remainder != 0)` for quotients below 2^128.
        fn div_small_quotient(&self, divisor: &Big) -> (u128, bool) {
            let (bits, divisor_bits) = (self.bit_len(), divisor.bit_len());
            if divisor_bits == 0 || bits < divisor_bits {
                return (0, !self.is_zero());
            }
            let span = bits - divisor_bits;
            let mut remainder = self.shr(span);
            let mut quotient = 0u128;
            for position in (0..=span).rev() {
                if position != span {
                    remainder = remainder.shl(1);
                    if self.bit(position) {
                        remainder.mul_add_small(1, 1);
                    }
                }
                quotient <<= 1;
                if remainder.cmp(divisor) != Ordering::Less {
                    remainder = remainder.sub(divisor);
                    quotient |= 1;
                }
            }
            (quotient, !remainder.is_zero())
        }

        /// Divides in place by `divisor`, returning the remainder.
        fn div_rem_small(&mut self, divisor: u32) -> u32 {
            let mut remainder = 0u64;
            for limb in self.limbs.iter_mut().rev() {
                let value = (remainder << 32) | *limb as u64;
                *limb = (value / divisor as u64) as u32;
                remainder = value % divisor as u64;
            }
            self.trim();
            remainder as u32
        }

        fn to_decimal(&self) -> String {
            if self.is_zero() {
                return "0".to_string();
            }
            let mut value = self.clone();
            let mut chunks = Vec::new();
            while !value.is_zero() {
                chunks.push(value.div_rem_small(1_000_000_000));
            }
            let mut text = String::new();
            for (index, chunk) in chunks.iter().rev().enumerate() {
                if index == 0 {
                    text.push_str(&chunk.to_string());
                } else {
                    text.push_str(&format!("{chunk:09}"));
                }
            }
            text
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn human(text: &str) -> String {
            LongDouble::parse(text.as_bytes())
                .unwrap()
                .to_human_string()
        }

        fn sum(a: &str, b: &str) -> Option<String> {
            let a = LongDouble::parse(a.as_bytes())?;
            let b = LongDouble::parse(b.as_bytes())?;
            a.add(b).map(LongDouble::to_human_string)
        }

        #[test]
        fn parses_with_long_double_precision() {
            // 0.1L is 0xCCCCCCCCCCCCCCCD * 2^-67.
            assert_eq!(
                LongDouble::parse(b"0.1"),
                Some(LongDouble::Finite {
                    negative: false,
                    mantissa: 0xCCCC_CCCC_CCCC_CCCD,
                    exponent: -67
                })
            );
            assert_eq!(
                LongDouble::parse(b"-1"),
                Some(LongDouble::Finite {
                    negative: true,
                    mantissa: 1 << 63,
                    exponent: -63
                })
            );
            assert_eq!(LongDouble::parse(b"0x1.8p1"), LongDouble::parse(b"3"));
            assert_eq!(LongDouble::parse(b"0X10"), LongDouble::parse(b"16"));
            assert_eq!(LongDouble::parse(b".5"), LongDouble::parse(b"5e-1"));
            assert_eq!(LongDouble::parse(b"1."), LongDouble::parse(b"1"));
            assert_eq!(LongDouble::parse(b"+2E+2"), LongDouble::parse(b"200"));
            assert_eq!(
                LongDouble::parse(b"-inf"),
                Some(LongDouble::Infinite { negative: true })
            );
            assert_eq!(
                LongDouble::parse(b"Infinity"),
                Some(LongDouble::Infinite { negative: false })
            );
        }

        #[test]
        fn refuses_what_string2ld_refuses() {
            for bad in [
                "",
                " 1",
                "1 ",
                "\t1",
                "nan",
                "-nan",
                "NaN(1)",
                "1e",
                "1e+",
                ".",
                "-",
                "0x",
                "0x.",
                "0x1p",
                "1x",
                "1.2.3",
                "1e99999",
                "1e5000",
                "-1e5000",
                "1e-5000",
                "0x1p20000",
                "infinit",
                "1\u{0}",
            ] {
                assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad:?}");
            }
            let mut long = b"1.".to_vec();
            long.resize(5119, b'0');
            assert_eq!(LongDouble::parse(&long), LongDouble::parse(b"1"));
            assert_eq!(
                LongDouble::parse(&vec![b'1'; 5119]),
                None,
                "1.1e5118 overflows"
            );
            assert_eq!(LongDouble::parse(&vec![b'1'; 5120]), None);
            assert!(LongDouble::parse(b"0e99999").is_some());
            // The largest long double parses, twice it does not.
            assert!(LongDouble::parse(b"1.18973149535723176502e+4932").is_some());
            assert_eq!(LongDouble::parse(b"2.4e4932"), None);
            // Subnormals are values, not underflow.
            assert!(LongDouble::parse(b"4e-4951").is_some());
            assert_eq!(LongDouble::parse(b"1e-4952"), None);
        }

        #[test]
        fn formats_like_ld2string_human() {
            assert_eq!(human("10.5"), "10.5");
            assert_eq!(human("3.0e3"), "3000");
            assert_eq!(human("-0"), "0");
            assert_eq!(human("0.1"), "0.1");
            assert_eq!(human("1e-18"), "0");
            assert_eq!(human("-1e-18"), "0");
            assert_eq!(human("5e-17"), "0.00000000000000005");
            assert_eq!(human("0.333333333333333333333333"), "0.33333333333333333");
            assert_eq!(human("1e20"), "100000000000000000000");
            assert_eq!(human("123456789.125"), "123456789.125");
            assert_eq!(human("-2.5"), "-2.5");
            assert_eq!(human("1e30"), "1000000000000000000024696061952");
        }

        #[test]
        fn adds_with_long_double_rounding() {
            assert_eq!(sum("10.5", "0.1").as_deref(), Some("10.6"));
            assert_eq!(sum("0.1", "0.2").as_deref(), Some("0.3"));
            assert_eq!(sum("3.0e3", "200").as_deref(), Some("3200"));
            assert_eq!(sum("1", "-1.1").as_deref(), Some("-0.1"));
            assert_eq!(sum("17179869184", "1.5").as_deref(), Some("17179869185.5"));
            assert_eq!(sum("1.5", "-1.5").as_deref(), Some("0"));
            assert_eq!(sum("1e4932", "1e4932"), None);
            assert_eq!(sum("inf", "1"), None);
            assert_eq!(sum("inf", "-inf"), None);
            // 2^64 + 1 is not representable with 64 significand bits: ties to even.
            assert_eq!(
                sum("18446744073709551616", "1").as_deref(),
                Some("18446744073709551616")
            );
            assert_eq!(
                sum("18446744073709551616", "3").as_deref(),
                Some("18446744073709551620")
            );
            assert_eq!(
                LongDouble::from_i64(i64::MIN).to_human_string(),
                "-9223372036854775808"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::resolve;

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

    fn array(items: Vec<Frame>) -> Frame {
        Frame::Array(items)
    }

    fn pair(start: i64, end: i64) -> Frame {
        array(vec![int(start), int(end)])
    }

    const SYNTAX: &str = "ERR syntax error";
    const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    const NOT_FLOAT: &str = "ERR value is not a valid float";

    // ---- GET / SET ----------------------------------------------------------------

    #[test]
    fn get_and_set_basics() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        assert_eq!(h.run(&["SET", "k", "hello"]), Frame::OK);
        assert_eq!(h.run(&["GET", "k"]), bulk("hello"));
        assert_eq!(h.run(&["set", "k", ""]), Frame::OK);
        assert_eq!(h.run(&["GET", "k"]), bulk(""));
        assert_eq!(
            h.run(&["GET"]),
            error("ERR wrong number of arguments for 'get' command")
        );
        assert_eq!(
            h.run(&["SET", "k"]),
            error("ERR wrong number of arguments for 'set' command")
        );
        let binary: &[u8] = b"a\x00b\r\n";
        assert_eq!(h.run_bytes(&[b"SET", b"bin", binary]), Frame::OK);
        assert_eq!(
            h.run_bytes(&[b"GET", b"bin"]),
            Frame::Bulk(Bytes::from_static(b"a\x00b\r\n"))
        );
    }

    #[test]
    fn set_chooses_redis_encodings() {
        let mut h = Harness::new();
        h.run(&["SET", "n", "123"]);
        assert_eq!(h.encoding("n"), Some("int"));
        assert_eq!(h.run(&["GET", "n"]), bulk("123"));
        h.run(&["SET", "n", "-9223372036854775808"]);
        assert_eq!(h.encoding("n"), Some("int"));
        h.run(&["SET", "n", "0123"]);
        assert_eq!(h.encoding("n"), Some("embstr"));
        h.run(&["SET", "n", "9223372036854775808"]);
        assert_eq!(h.encoding("n"), Some("embstr"));
        h.run(&["SET", "s", &"x".repeat(44)]);
        assert_eq!(h.encoding("s"), Some("embstr"));
        h.run(&["SET", "s", &"x".repeat(45)]);
        assert_eq!(h.encoding("s"), Some("raw"));
    }

    #[test]
    fn set_nx_xx_and_get() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SET", "k", "v1", "XX"]), Frame::Null);
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        assert_eq!(h.run(&["SET", "k", "v1", "NX"]), Frame::OK);
        assert_eq!(h.run(&["SET", "k", "v2", "nx"]), Frame::Null);
        assert_eq!(h.run(&["GET", "k"]), bulk("v1"));
        assert_eq!(h.run(&["SET", "k", "v2", "XX"]), Frame::OK);
        assert_eq!(h.run(&["GET", "k"]), bulk("v2"));
        // GET returns the old value (or nil) instead of OK.
        assert_eq!(h.run(&["SET", "k", "v3", "GET"]), bulk("v2"));
        assert_eq!(h.run(&["SET", "fresh", "v", "GET"]), Frame::Null);
        assert_eq!(h.run(&["GET", "fresh"]), bulk("v"));
        // NX + GET is allowed since 7.0: old value back, nothing stored.
        assert_eq!(h.run(&["SET", "k", "v4", "NX", "GET"]), bulk("v3"));
        assert_eq!(h.run(&["GET", "k"]), bulk("v3"));
        assert_eq!(h.run(&["SET", "new", "v", "GET", "NX"]), Frame::Null);
        assert_eq!(h.run(&["GET", "new"]), bulk("v"));
        // XX + GET on a missing key: nil, nothing stored.
        assert_eq!(h.run(&["SET", "missing", "v", "XX", "GET"]), Frame::Null);
        assert_eq!(h.run(&["GET", "missing"]), Frame::Null);
        assert_eq!(h.run(&["SET", "k", "v5", "XX", "GET"]), bulk("v3"));
        assert_eq!(h.run(&["GET", "k"]), bulk("v5"));
        // Repeated options are fine.
        assert_eq!(
            h.run(&["SET", "k", "v6", "GET", "GET", "XX", "XX"]),
            bulk("v5")
        );
    }

    #[test]
    fn set_syntax_errors() {
        let mut h = Harness::new();
        for words in [
            &["SET", "k", "v", "NX", "XX"][..],
            &["SET", "k", "v", "XX", "NX"],
            &["SET", "k", "v", "EX", "10", "PX", "100"],
            &["SET", "k", "v", "PX", "100", "EX", "10"],
            &["SET", "k", "v", "EXAT", "10", "PXAT", "100"],
            &["SET", "k", "v", "EX", "10", "EXAT", "10"],
            &["SET", "k", "v", "KEEPTTL", "EX", "10"],
            &["SET", "k", "v", "PX", "10", "KEEPTTL"],
            &["SET", "k", "v", "EX"],
            &["SET", "k", "v", "PXAT"],
            &["SET", "k", "v", "PERSIST"],
            &["SET", "k", "v", "FOO"],
            &["SET", "k", "v", "NXX"],
            &["SET", "k", "v", "10"],
        ] {
            assert_eq!(h.run(words), error(SYNTAX), "{words:?}");
        }
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        // The same expire option twice: the last one wins.
        assert_eq!(h.run(&["SET", "k", "v", "EX", "10", "EX", "20"]), Frame::OK);
        assert_eq!(h.expire_at("k"), Some(NOW + 20_000));
    }

    #[test]
    fn set_expire_validation() {
        let mut h = Harness::new();
        let invalid = error("ERR invalid expire time in 'set' command");
        assert_eq!(h.run(&["SET", "k", "v", "EX", "0"]), invalid);
        assert_eq!(h.run(&["SET", "k", "v", "PX", "-5"]), invalid);
        assert_eq!(h.run(&["SET", "k", "v", "EXAT", "0"]), invalid);
        assert_eq!(h.run(&["SET", "k", "v", "PXAT", "-1"]), invalid);
        assert_eq!(
            h.run(&["SET", "k", "v", "EX", "9223372036854775"]),
            invalid,
            "adding now overflows"
        );
        assert_eq!(
            h.run(&["SET", "k", "v", "EX", "9223372036854776"]),
            invalid,
            "seconds to ms overflows"
        );
        assert_eq!(
            h.run(&["SET", "k", "v", "PX", "9223372036854775807"]),
            invalid
        );
        assert_eq!(h.run(&["SET", "k", "v", "EX", "ten"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["SET", "k", "v", "EX", "1.5"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        // Absolute times only need to fit.
        assert_eq!(
            h.run(&["SET", "k", "v", "PXAT", "9223372036854775807"]),
            Frame::OK
        );
        assert_eq!(h.expire_at("k"), Some(i64::MAX as u64));
        assert_eq!(
            h.run(&["SET", "k", "v", "EXAT", "9223372036854775"]),
            Frame::OK
        );
        assert_eq!(h.expire_at("k"), Some(9_223_372_036_854_775_000));
        // The expire is validated before GET, so nothing is read.
        let lookups = h.keyspace.stats.keyspace_hits + h.keyspace.stats.keyspace_misses;
        assert_eq!(h.run(&["SET", "k", "v", "GET", "EX", "0"]), invalid);
        assert_eq!(
            h.keyspace.stats.keyspace_hits + h.keyspace.stats.keyspace_misses,
            lookups
        );
    }

    #[test]
    fn set_expiry_options() {
        let mut h = Harness::new();
        h.run(&["SET", "ex", "v", "EX", "10"]);
        assert_eq!(h.expire_at("ex"), Some(NOW + 10_000));
        h.run(&["SET", "px", "v", "px", "1500"]);
        assert_eq!(h.expire_at("px"), Some(NOW + 1500));
        h.run(&["SET", "exat", "v", "EXAT", &(NOW / 1000 + 100).to_string()]);
        assert_eq!(h.expire_at("exat"), Some((NOW / 1000 + 100) * 1000));
        h.run(&["SET", "pxat", "v", "PXAT", &(NOW + 5).to_string()]);
        assert_eq!(h.expire_at("pxat"), Some(NOW + 5));

        // Alive at exactly its expiry time, gone a millisecond later.
        h.advance(1500);
        assert_eq!(h.run(&["GET", "px"]), bulk("v"));
        h.advance(1);
        assert_eq!(h.run(&["GET", "px"]), Frame::Null);
        assert_eq!(h.run(&["GET", "pxat"]), Frame::Null);
        assert_eq!(h.run(&["GET", "ex"]), bulk("v"));

        // Plain SET clears the TTL, KEEPTTL keeps it.
        h.run(&["SET", "ex", "w", "KEEPTTL"]);
        assert_eq!(h.expire_at("ex"), Some(NOW + 10_000));
        assert_eq!(h.run(&["GET", "ex"]), bulk("w"));
        h.run(&["SET", "ex", "x"]);
        assert_eq!(h.expire_at("ex"), None);
        // KEEPTTL on a key without TTL, or a missing one, stores without TTL.
        h.run(&["SET", "kt", "v", "KEEPTTL"]);
        assert_eq!(h.expire_at("kt"), None);
        assert_eq!(h.run(&["GET", "kt"]), bulk("v"));
    }

    #[test]
    fn set_with_past_absolute_time_leaves_no_key() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "old"]);
        assert_eq!(h.run(&["SET", "k", "v", "EXAT", "1"]), Frame::OK);
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        assert_eq!(
            h.run(&["SET", "k", "v", "PXAT", &(NOW - 1).to_string()]),
            Frame::OK
        );
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
    }

    #[test]
    fn set_over_an_expired_key_with_keepttl_starts_fresh() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v", "PX", "10"]);
        h.advance(11);
        assert_eq!(h.run(&["SET", "k", "w", "KEEPTTL"]), Frame::OK);
        assert_eq!(h.expire_at("k"), None);
        assert_eq!(h.run(&["GET", "k"]), bulk("w"));
        // NX sees an expired key as absent.
        h.run(&["SET", "e", "v", "PX", "10"]);
        h.advance(11);
        assert_eq!(h.run(&["SET", "e", "w", "NX"]), Frame::OK);
        assert_eq!(h.run(&["SET", "e", "x", "GET"]), bulk("w"));
    }

    #[test]
    fn setnx_setex_psetex() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["SETNX", "k", "a"]), int(1));
        assert_eq!(h.run(&["SETNX", "k", "b"]), int(0));
        assert_eq!(h.run(&["GET", "k"]), bulk("a"));

        assert_eq!(h.run(&["SETEX", "k", "10", "b"]), Frame::OK);
        assert_eq!(h.run(&["GET", "k"]), bulk("b"));
        assert_eq!(h.expire_at("k"), Some(NOW + 10_000));
        assert_eq!(
            h.run(&["SETEX", "k", "0", "c"]),
            error("ERR invalid expire time in 'setex' command")
        );
        assert_eq!(
            h.run(&["SETEX", "k", "-10", "c"]),
            error("ERR invalid expire time in 'setex' command")
        );
        assert_eq!(h.run(&["SETEX", "k", "x", "c"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["SETEX", "k", "10"]),
            error("ERR wrong number of arguments for 'setex' command")
        );

        assert_eq!(h.run(&["PSETEX", "p", "100", "v"]), Frame::OK);
        assert_eq!(h.expire_at("p"), Some(NOW + 100));
        assert_eq!(
            h.run(&["PSETEX", "p", "0", "v"]),
            error("ERR invalid expire time in 'psetex' command")
        );
        h.advance(101);
        assert_eq!(h.run(&["GET", "p"]), Frame::Null);
        // SETNX over an expired key succeeds.
        h.run(&["PSETEX", "p", "5", "v"]);
        h.advance(6);
        assert_eq!(h.run(&["SETNX", "p", "again"]), int(1));
        assert_eq!(h.expire_at("p"), None);
    }

    #[test]
    fn getset_and_getdel() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["GETSET", "k", "1"]), Frame::Null);
        assert_eq!(h.encoding("k"), Some("int"));
        h.run(&["SET", "k", "a", "EX", "100"]);
        assert_eq!(h.run(&["GETSET", "k", "b"]), bulk("a"));
        assert_eq!(h.expire_at("k"), None, "GETSET clears the TTL");
        assert_eq!(h.run(&["GET", "k"]), bulk("b"));

        assert_eq!(h.run(&["GETDEL", "k"]), bulk("b"));
        assert_eq!(h.run(&["GETDEL", "k"]), Frame::Null);
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        h.run(&["SET", "n", "42"]);
        assert_eq!(h.run(&["GETDEL", "n"]), bulk("42"));
    }

    #[test]
    fn getex_options() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["GETEX", "missing"]), Frame::Null);
        assert_eq!(h.run(&["GETEX", "missing", "EX", "10"]), Frame::Null);
        // The expire value is only checked once the key is found.
        assert_eq!(h.run(&["GETEX", "missing", "EX", "-1"]), Frame::Null);

        h.run(&["SET", "k", "v", "EX", "100"]);
        assert_eq!(h.run(&["GETEX", "k"]), bulk("v"));
        assert_eq!(
            h.expire_at("k"),
            Some(NOW + 100_000),
            "no option keeps the TTL"
        );
        assert_eq!(h.run(&["GETEX", "k", "EX", "10"]), bulk("v"));
        assert_eq!(h.expire_at("k"), Some(NOW + 10_000));
        assert_eq!(h.run(&["GETEX", "k", "PX", "50"]), bulk("v"));
        assert_eq!(h.expire_at("k"), Some(NOW + 50));
        assert_eq!(
            h.run(&["GETEX", "k", "EXAT", &(NOW / 1000 + 7).to_string()]),
            bulk("v")
        );
        assert_eq!(h.expire_at("k"), Some((NOW / 1000 + 7) * 1000));
        assert_eq!(
            h.run(&["GETEX", "k", "PXAT", &(NOW + 77).to_string()]),
            bulk("v")
        );
        assert_eq!(h.expire_at("k"), Some(NOW + 77));
        assert_eq!(h.run(&["GETEX", "k", "PERSIST"]), bulk("v"));
        assert_eq!(h.expire_at("k"), None);
        assert_eq!(h.run(&["GETEX", "k", "PERSIST"]), bulk("v"));

        // A past absolute time deletes the key after replying with it.
        assert_eq!(h.run(&["GETEX", "k", "PXAT", &NOW.to_string()]), bulk("v"));
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        h.run(&["SET", "k", "v"]);
        assert_eq!(h.run(&["GETEX", "k", "EXAT", "1"]), bulk("v"));
        assert_eq!(h.run(&["GET", "k"]), Frame::Null);

        // Expiry set by GETEX takes effect.
        h.run(&["SET", "k", "v"]);
        h.run(&["GETEX", "k", "PX", "10"]);
        h.advance(11);
        assert_eq!(h.run(&["GETEX", "k"]), Frame::Null);
    }

    #[test]
    fn getex_errors() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "v"]);
        for words in [
            &["GETEX", "k", "NX"][..],
            &["GETEX", "k", "XX"],
            &["GETEX", "k", "GET"],
            &["GETEX", "k", "KEEPTTL"],
            &["GETEX", "k", "EX"],
            &["GETEX", "k", "EX", "10", "PERSIST"],
            &["GETEX", "k", "PERSIST", "PX", "10"],
            &["GETEX", "k", "EX", "10", "PX", "10"],
            &["GETEX", "k", "FOO"],
        ] {
            assert_eq!(h.run(words), error(SYNTAX), "{words:?}");
        }
        let invalid = error("ERR invalid expire time in 'getex' command");
        assert_eq!(h.run(&["GETEX", "k", "EX", "0"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "PXAT", "-1"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "EX", "9223372036854775807"]), invalid);
        assert_eq!(h.run(&["GETEX", "k", "EX", "x"]), error(NOT_INTEGER));
        assert_eq!(h.expire_at("k"), None);
        assert_eq!(
            h.run(&["GETEX"]),
            error("ERR wrong number of arguments for 'getex' command")
        );
    }

    // ---- Multi-key ------------------------------------------------------------------

    #[test]
    fn mget_mset_msetnx() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["MSET", "a", "1", "b", "two"]), Frame::OK);
        assert_eq!(
            h.run(&["MGET", "a", "b", "c", "a"]),
            array(vec![bulk("1"), bulk("two"), Frame::Null, bulk("1")])
        );
        assert_eq!(h.encoding("a"), Some("int"));
        assert_eq!(h.run(&["MSET", "a", "x", "a", "y"]), Frame::OK);
        assert_eq!(h.run(&["GET", "a"]), bulk("y"));
        assert_eq!(
            h.run(&["MSET", "a", "1", "b"]),
            error("ERR wrong number of arguments for 'mset' command")
        );
        assert_eq!(
            h.run(&["MSET", "a"]),
            error("ERR wrong number of arguments for 'mset' command")
        );

        // MSET clears TTLs.
        h.run(&["SET", "t", "v", "EX", "10"]);
        h.run(&["MSET", "t", "w"]);
        assert_eq!(h.expire_at("t"), None);

        assert_eq!(h.run(&["MSETNX", "x", "1", "a", "2"]), int(0));
        assert_eq!(h.run(&["GET", "x"]), Frame::Null);
        assert_eq!(h.run(&["MSETNX", "x", "1", "z", "2"]), int(1));
        assert_eq!(
            h.run(&["MGET", "x", "z"]),
            array(vec![bulk("1"), bulk("2")])
        );
        assert_eq!(
            h.run(&["MSETNX", "q", "1", "r"]),
            error("ERR wrong number of arguments for 'msetnx' command")
        );
        // An expired key does not block MSETNX.
        h.run(&["SET", "gone", "v", "PX", "1"]);
        h.advance(2);
        assert_eq!(h.run(&["MSETNX", "gone", "back"]), int(1));
        assert_eq!(h.run(&["GET", "gone"]), bulk("back"));
    }

    // ---- APPEND / STRLEN ----------------------------------------------------------

    #[test]
    fn append_and_strlen() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["STRLEN", "k"]), int(0));
        assert_eq!(h.run(&["APPEND", "k", "Hello "]), int(6));
        assert_eq!(h.run(&["APPEND", "k", "World"]), int(11));
        assert_eq!(h.run(&["GET", "k"]), bulk("Hello World"));
        assert_eq!(h.run(&["STRLEN", "k"]), int(11));
        assert_eq!(h.encoding("k"), Some("raw"));

        // A new key stores the argument as SET would; appending makes it raw.
        assert_eq!(h.run(&["APPEND", "n", "123"]), int(3));
        assert_eq!(h.encoding("n"), Some("int"));
        assert_eq!(h.run(&["STRLEN", "n"]), int(3));
        assert_eq!(h.run(&["APPEND", "n", "4"]), int(4));
        assert_eq!(h.encoding("n"), Some("raw"));
        assert_eq!(h.run(&["GET", "n"]), bulk("1234"));
        assert_eq!(h.run(&["INCR", "n"]), int(1235));

        h.run(&["SET", "m", "-12"]);
        assert_eq!(h.run(&["STRLEN", "m"]), int(3));
        assert_eq!(h.run(&["APPEND", "m", ""]), int(3));
        assert_eq!(h.encoding("m"), Some("raw"));

        // APPEND keeps the TTL.
        h.run(&["SET", "t", "a", "EX", "10"]);
        h.run(&["APPEND", "t", "b"]);
        assert_eq!(h.expire_at("t"), Some(NOW + 10_000));
    }

    #[test]
    fn append_respects_max_string_size() {
        let mut h = Harness::new();
        h.keyspace.config.max_string_bytes = 10;
        assert_eq!(h.run(&["APPEND", "k", "12345"]), int(5));
        assert_eq!(h.run(&["APPEND", "k", "67890"]), int(10));
        assert_eq!(
            h.run(&["APPEND", "k", "x"]),
            error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
        );
        assert_eq!(h.run(&["GET", "k"]), bulk("1234567890"));
    }

    // ---- Counters -------------------------------------------------------------------

    #[test]
    fn incr_family() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["INCR", "c"]), int(1));
        assert_eq!(h.encoding("c"), Some("int"));
        assert_eq!(h.run(&["INCR", "c"]), int(2));
        assert_eq!(h.run(&["INCRBY", "c", "40"]), int(42));
        assert_eq!(h.run(&["DECR", "c"]), int(41));
        assert_eq!(h.run(&["DECRBY", "c", "50"]), int(-9));
        assert_eq!(h.run(&["INCRBY", "c", "-1"]), int(-10));
        assert_eq!(h.run(&["GET", "c"]), bulk("-10"));
        assert_eq!(h.run(&["DECR", "new"]), int(-1));
        assert_eq!(h.run(&["DECRBY", "new2", "5"]), int(-5));
        assert_eq!(h.run(&["INCRBY", "new3", "-7"]), int(-7));

        // A string holding a canonical integer becomes `int`.
        h.run(&["SET", "s", "10"]);
        h.run(&["APPEND", "s", "0"]);
        assert_eq!(h.encoding("s"), Some("raw"));
        assert_eq!(h.run(&["INCR", "s"]), int(101));
        assert_eq!(h.encoding("s"), Some("int"));

        // The TTL survives.
        h.run(&["SET", "t", "5", "EX", "10"]);
        assert_eq!(h.run(&["INCR", "t"]), int(6));
        assert_eq!(h.expire_at("t"), Some(NOW + 10_000));
    }

    #[test]
    fn incr_errors_and_overflow() {
        let mut h = Harness::new();
        for value in [
            " 1",
            "1 ",
            "1.0",
            "abc",
            "",
            "01",
            "+1",
            "-0",
            "9223372036854775808",
        ] {
            h.run(&["SET", "k", value]);
            assert_eq!(h.run(&["INCR", "k"]), error(NOT_INTEGER), "{value:?}");
            assert_eq!(h.run(&["GET", "k"]), bulk(value));
        }
        assert_eq!(h.run(&["INCRBY", "k2", "x"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["INCRBY", "k2", "1.5"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["DECRBY", "k2", "99999999999999999999"]),
            error(NOT_INTEGER)
        );
        assert_eq!(h.run(&["EXISTS", "k2"]), int(0));

        h.run(&["SET", "max", "9223372036854775807"]);
        assert_eq!(
            h.run(&["INCR", "max"]),
            error("ERR increment or decrement would overflow")
        );
        assert_eq!(
            h.run(&["INCRBY", "max", "9223372036854775807"]),
            error("ERR increment or decrement would overflow")
        );
        assert_eq!(h.run(&["INCRBY", "max", "-9223372036854775808"]), int(-1));
        h.run(&["SET", "min", "-9223372036854775808"]);
        assert_eq!(
            h.run(&["DECR", "min"]),
            error("ERR increment or decrement would overflow")
        );
        assert_eq!(
            h.run(&["DECRBY", "min", "1"]),
            error("ERR increment or decrement would overflow")
        );
        assert_eq!(h.run(&["GET", "min"]), bulk("-9223372036854775808"));
        h.run(&["SET", "zero", "0"]);
        assert_eq!(
            h.run(&["DECRBY", "zero", "-9223372036854775808"]),
            error("ERR decrement would overflow")
        );
        assert_eq!(
            h.run(&["DECRBY", "zero", "-9223372036854775807"]),
            int(i64::MAX)
        );
    }

    #[test]
    fn incrbyfloat_formats_like_redis() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "10.50"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "0.1"]), bulk("10.6"));
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "-5"]), bulk("5.6"));
        assert_eq!(h.run(&["GET", "k"]), bulk("5.6"));
        h.run(&["SET", "k", "5.0e3"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "2.0e2"]), bulk("5200"));
        h.run(&["SET", "k", "3.0e3"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "200"]), bulk("3200"));

        assert_eq!(h.run(&["INCRBYFLOAT", "new", "1"]), bulk("1"));
        assert_eq!(h.run(&["INCRBYFLOAT", "new", "0.25"]), bulk("1.25"));
        assert_eq!(h.run(&["GET", "new"]), bulk("1.25"));
        h.run(&["SET", "f", "1.5"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "f", "1.5"]), bulk("3"));
        h.run(&["SET", "big", "17179869184"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "big", "1.5"]), bulk("17179869185.5"));
        h.run(&["SET", "big", "17179869184"]);
        assert_eq!(
            h.run(&["INCRBYFLOAT", "big", "17179869184"]),
            bulk("34359738368")
        );
        h.run(&["SET", "d", "1"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "d", "-1.1"]), bulk("-0.1"));
        assert_eq!(h.run(&["INCRBYFLOAT", "sum", "0.1"]), bulk("0.1"));
        assert_eq!(h.run(&["INCRBYFLOAT", "sum", "0.2"]), bulk("0.3"));
        // No negative zero.
        assert_eq!(
            h.run(&["INCRBYFLOAT", "z", "0.024390243902439025"]),
            bulk("0.02439024390243902")
        );
        assert_eq!(
            h.run(&["INCRBYFLOAT", "z", "-0.024390243902439025"]),
            bulk("0")
        );
        assert_eq!(h.run(&["INCRBYFLOAT", "nz", "-0"]), bulk("0"));
        // strtold forms.
        assert_eq!(h.run(&["INCRBYFLOAT", "h", "0x10"]), bulk("16"));
        assert_eq!(h.run(&["INCRBYFLOAT", "h", "+.5"]), bulk("16.5"));
        assert_eq!(h.run(&["INCRBYFLOAT", "h", "1E1"]), bulk("26.5"));
        assert_eq!(h.run(&["INCRBYFLOAT", "tiny", "1e-20"]), bulk("0"));
        assert_eq!(
            h.run(&["INCRBYFLOAT", "huge", "1e25"]),
            bulk("10000000000000000000000000")
        );
        assert_eq!(
            h.run(&["INCRBYFLOAT", "ints", "9223372036854775807"]),
            bulk("9223372036854775807")
        );
    }

    #[test]
    fn incrbyfloat_storage_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "3"]), bulk("3"));
        assert_eq!(h.encoding("k"), Some("embstr"), "not int encoded, as Redis");
        h.run(&["SET", "k", "7", "EX", "10"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "0.5"]), bulk("7.5"));
        assert_eq!(h.expire_at("k"), Some(NOW + 10_000), "TTL kept");

        for value in ["  11", "11  ", "abc", "1.5.5", "nan", "1e5000"] {
            h.run(&["SET", "bad", value]);
            assert_eq!(
                h.run(&["INCRBYFLOAT", "bad", "1"]),
                error(NOT_FLOAT),
                "{value:?}"
            );
        }
        h.run(&["SET", "k", "1"]);
        for increment in ["x", " 1", "1 ", "nan", "", "1e", "0x"] {
            assert_eq!(
                h.run(&["INCRBYFLOAT", "k", increment]),
                error(NOT_FLOAT),
                "{increment:?}"
            );
        }
        assert_eq!(h.run(&["INCRBYFLOAT", "missing", "x"]), error(NOT_FLOAT));
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
        // A NUL inside the value is not a float.
        h.run_bytes(&[b"SET", b"nul", b"1\x002"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "nul", "1"]), error(NOT_FLOAT));

        let nan_or_inf = error("ERR increment would produce NaN or Infinity");
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "+inf"]), nan_or_inf);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "-inf"]), nan_or_inf);
        assert_eq!(h.run(&["INCRBYFLOAT", "infkey", "inf"]), nan_or_inf);
        assert_eq!(h.run(&["EXISTS", "infkey"]), int(0));
        h.run(&["SET", "k", "1.1e4932"]);
        assert_eq!(h.run(&["INCRBYFLOAT", "k", "1.1e4932"]), nan_or_inf);
        assert_eq!(h.run(&["GET", "k"]), bulk("1.1e4932"));
    }

    // ---- SETRANGE / GETRANGE ------------------------------------------------------

    #[test]
    fn setrange() {
        let mut h = Harness::new();
        h.run(&["SET", "k", "Hello World"]);
        assert_eq!(h.run(&["SETRANGE", "k", "6", "Redis"]), int(11));
        assert_eq!(h.run(&["GET", "k"]), bulk("Hello Redis"));
        assert_eq!(h.encoding("k"), Some("raw"));

        // Padding with zero bytes, on a missing key too.
        assert_eq!(h.run(&["SETRANGE", "p", "3", "ab"]), int(5));
        assert_eq!(
            h.run(&["GET", "p"]),
            Frame::Bulk(Bytes::from_static(b"\0\0\0ab"))
        );
        assert_eq!(h.encoding("p"), Some("raw"));
        assert_eq!(h.run(&["SETRANGE", "k", "13", "!"]), int(14));
        assert_eq!(
            h.run(&["GET", "k"]),
            Frame::Bulk(Bytes::from_static(b"Hello Redis\0\0!"))
        );

        // Empty value: no key created; an existing one is reported untouched.
        assert_eq!(h.run(&["SETRANGE", "missing", "5", ""]), int(0));
        assert_eq!(h.run(&["EXISTS", "missing"]), int(0));
        h.run(&["SET", "n", "1234"]);
        assert_eq!(h.run(&["SETRANGE", "n", "100", ""]), int(4));
        assert_eq!(h.encoding("n"), Some("int"));
        assert_eq!(h.run(&["SETRANGE", "n", "1", "x"]), int(4));
        assert_eq!(h.run(&["GET", "n"]), bulk("1x34"));
        assert_eq!(h.encoding("n"), Some("raw"));

        assert_eq!(
            h.run(&["SETRANGE", "k", "-1", "x"]),
            error("ERR offset is out of range")
        );
        assert_eq!(h.run(&["SETRANGE", "k", "x", "x"]), error(NOT_INTEGER));

        // TTL kept.
        h.run(&["SET", "t", "abc", "EX", "10"]);
        h.run(&["SETRANGE", "t", "0", "X"]);
        assert_eq!(h.expire_at("t"), Some(NOW + 10_000));
        assert_eq!(h.run(&["GET", "t"]), bulk("Xbc"));
    }

    #[test]
    fn setrange_respects_max_string_size() {
        let mut h = Harness::new();
        let too_long = error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        let limit = (512 * 1024 * 1024 - 4).to_string();
        assert_eq!(h.run(&["SETRANGE", "k", &limit, "world"]), too_long);
        assert_eq!(h.run(&["EXISTS", "k"]), int(0));
        h.run(&["SET", "k", "hello"]);
        assert_eq!(h.run(&["SETRANGE", "k", &limit, "world"]), too_long);
        assert_eq!(
            h.run(&["SETRANGE", "k", "9223372036854775807", "world"]),
            too_long
        );
        h.keyspace.config.max_string_bytes = 8;
        assert_eq!(h.run(&["SETRANGE", "k", "3", "abcde"]), int(8));
        assert_eq!(h.run(&["SETRANGE", "k", "4", "abcde"]), too_long);
    }

    #[test]
    fn getrange_and_substr() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["GETRANGE", "missing", "0", "1"]), bulk(""));
        h.run(&["SET", "k", "Hello World"]);
        let cases = [
            ("0", "3", "Hell"),
            ("0", "-1", "Hello World"),
            ("-4", "-1", "orld"),
            ("5", "3", ""),
            ("5", "5000", " World"),
            ("-5000", "10000", "Hello World"),
            ("-1", "-5", ""),
            ("0", "0", "H"),
            ("10", "10", "d"),
            ("11", "20", ""),
            ("-9223372036854775808", "9223372036854775807", "Hello World"),
            ("0", "4294967297", "Hello World"),
        ];
        for (start, end, expected) in cases {
            assert_eq!(
                h.run(&["GETRANGE", "k", start, end]),
                bulk(expected),
                "{start} {end}"
            );
            assert_eq!(
                h.run(&["SUBSTR", "k", start, end]),
                bulk(expected),
                "{start} {end}"
            );
        }
        h.run(&["SET", "ab", "ab"]);
        assert_eq!(h.run(&["GETRANGE", "ab", "-5", "-10"]), bulk(""));
        assert_eq!(h.run(&["GETRANGE", "ab", "-10", "-5"]), bulk("a"));

        h.run(&["SET", "n", "1234"]);
        for (start, end, expected) in [
            ("0", "2", "123"),
            ("0", "-1", "1234"),
            ("-3", "-1", "234"),
            ("5", "3", ""),
            ("3", "5000", "4"),
            ("-5000", "10000", "1234"),
        ] {
            assert_eq!(
                h.run(&["GETRANGE", "n", start, end]),
                bulk(expected),
                "{start} {end}"
            );
        }
        h.run(&["SET", "empty", ""]);
        assert_eq!(h.run(&["GETRANGE", "empty", "0", "-1"]), bulk(""));
        assert_eq!(h.run(&["GETRANGE", "k", "a", "1"]), error(NOT_INTEGER));
        assert_eq!(h.run(&["GETRANGE", "k", "0", "1.5"]), error(NOT_INTEGER));
        assert_eq!(
            h.run(&["GETRANGE", "k", "0"]),
            error("ERR wrong number of arguments for 'getrange' command")
        );
    }

    // ---- LCS ------------------------------------------------------------------------

    #[test]
    fn lcs_examples_from_the_docs() {
        let mut h = Harness::new();
        h.run(&["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
        assert_eq!(h.run(&["LCS", "key1", "key2"]), bulk("mytext"));
        assert_eq!(h.run(&["LCS", "key1", "key2", "LEN"]), int(6));
        let four_to_seven = array(vec![pair(4, 7), pair(5, 8)]);
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "IDX"]),
            Frame::Map(vec![
                (
                    bulk("matches"),
                    array(vec![
                        four_to_seven.clone(),
                        array(vec![pair(2, 3), pair(0, 1)])
                    ])
                ),
                (bulk("len"), int(6)),
            ])
        );
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4"]),
            Frame::Map(vec![
                (bulk("matches"), array(vec![four_to_seven])),
                (bulk("len"), int(6)),
            ])
        );
        assert_eq!(
            h.run(&[
                "LCS",
                "key1",
                "key2",
                "IDX",
                "MINMATCHLEN",
                "4",
                "WITHMATCHLEN"
            ]),
            Frame::Map(vec![
                (
                    bulk("matches"),
                    array(vec![array(vec![pair(4, 7), pair(5, 8), int(4)])])
                ),
                (bulk("len"), int(6)),
            ])
        );
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "idx", "withmatchlen"]),
            Frame::Map(vec![
                (
                    bulk("matches"),
                    array(vec![
                        array(vec![pair(4, 7), pair(5, 8), int(4)]),
                        array(vec![pair(2, 3), pair(0, 1), int(2)]),
                    ])
                ),
                (bulk("len"), int(6)),
            ])
        );
        // A negative MINMATCHLEN counts as 0; WITHMATCHLEN/MINMATCHLEN alone are ignored.
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "-3"]),
            h.run(&["LCS", "key1", "key2", "IDX"])
        );
        assert_eq!(
            h.run(&["LCS", "key1", "key2", "WITHMATCHLEN", "MINMATCHLEN", "9"]),
            bulk("mytext")
        );
    }

    #[test]
    fn lcs_idx_reply_on_the_wire() {
        let mut h = Harness::new();
        h.run(&["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
        let reply = h.run(&[
            "LCS",
            "key1",
            "key2",
            "IDX",
            "MINMATCHLEN",
            "4",
            "WITHMATCHLEN",
        ]);
        let encode = |protocol| {
            let mut out = bytes::BytesMut::new();
            resp::encode(&reply, protocol, &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        let body = "$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n";
        assert_eq!(encode(resp::Protocol::Resp2), format!("*4\r\n{body}"));
        assert_eq!(encode(resp::Protocol::Resp3), format!("%2\r\n{body}"));
    }

    #[test]
    fn lcs_edge_cases_and_errors() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["LCS", "a", "b"]), bulk(""));
        assert_eq!(h.run(&["LCS", "a", "b", "LEN"]), int(0));
        assert_eq!(
            h.run(&["LCS", "a", "b", "IDX"]),
            Frame::Map(vec![
                (bulk("matches"), array(vec![])),
                (bulk("len"), int(0))
            ])
        );
        h.run(&["SET", "a", "abcdef"]);
        assert_eq!(h.run(&["LCS", "a", "b"]), bulk(""));
        assert_eq!(h.run(&["LCS", "a", "a"]), bulk("abcdef"));
        assert_eq!(
            h.run(&["LCS", "a", "a", "IDX", "WITHMATCHLEN"]),
            Frame::Map(vec![
                (
                    bulk("matches"),
                    array(vec![array(vec![pair(0, 5), pair(0, 5), int(6)])])
                ),
                (bulk("len"), int(6)),
            ])
        );
        h.run(&["SET", "n1", "12345"]);
        h.run(&["SET", "n2", "2468"]);
        assert_eq!(h.run(&["LCS", "n1", "n2"]), bulk("24"));

        assert_eq!(
            h.run(&["LCS", "a", "b", "LEN", "IDX"]),
            error("ERR If you want both the length and indexes, please just use IDX.")
        );
        assert_eq!(h.run(&["LCS", "a", "b", "FOO"]), error(SYNTAX));
        assert_eq!(h.run(&["LCS", "a", "b", "MINMATCHLEN"]), error(SYNTAX));
        assert_eq!(
            h.run(&["LCS", "a", "b", "MINMATCHLEN", "x"]),
            error(NOT_INTEGER)
        );
        assert_eq!(
            h.run(&["LCS", "a"]),
            error("ERR wrong number of arguments for 'lcs' command")
        );

        h.keyspace.config.max_string_bytes = 100;
        h.run(&["SET", "long", &"x".repeat(10)]);
        assert_eq!(
            h.run(&["LCS", "long", "long"]),
            error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
        );
        assert_eq!(h.run(&["LCS", "long", "missing"]), bulk(""));
    }

    #[test]
    fn lcs_backtracking_matches_redis_order() {
        let mut h = Harness::new();
        h.run(&["MSET", "x", "ABCBDAB", "y", "BDCABA"]);
        assert_eq!(h.run(&["LCS", "x", "y", "LEN"]), int(4));
        let Frame::Bulk(common) = h.run(&["LCS", "x", "y"]) else {
            panic!("not a bulk");
        };
        assert_eq!(common.len(), 4);
        let Frame::Map(fields) = h.run(&["LCS", "x", "y", "IDX", "WITHMATCHLEN"]) else {
            panic!("not a map");
        };
        let Frame::Array(matches) = &fields[0].1 else {
            panic!("matches not an array");
        };
        let total: i64 = matches
            .iter()
            .map(|item| match item {
                Frame::Array(parts) => match parts[2] {
                    Frame::Integer(length) => length,
                    _ => panic!("no match length"),
                },
                _ => panic!("match not an array"),
            })
            .sum();
        assert_eq!(total, 4, "ranges cover the whole subsequence");
    }

    // ---- Bookkeeping -----------------------------------------------------------------

    #[test]
    fn hits_misses_and_dirty() {
        let mut h = Harness::new();
        h.run(&["GET", "a"]);
        h.run(&["SET", "a", "1"]);
        h.run(&["GET", "a"]);
        h.run(&["MGET", "a", "b", "a"]);
        let stats = h.keyspace.stats.clone();
        assert_eq!((stats.keyspace_hits, stats.keyspace_misses), (3, 2));
        // Write lookups count neither.
        h.run(&["INCR", "a"]);
        h.run(&["SETNX", "a", "x"]);
        h.run(&["APPEND", "zz", "x"]);
        assert_eq!(h.keyspace.stats.keyspace_hits, 3);
        assert_eq!(h.keyspace.stats.keyspace_misses, 2);

        let before = h.keyspace.stats.dirty;
        h.run(&["MSET", "x", "1", "y", "2", "z", "3"]);
        assert_eq!(h.keyspace.stats.dirty, before + 3);
        let before = h.keyspace.stats.dirty;
        h.run(&["SET", "x", "1", "NX"]);
        h.run(&["SETRANGE", "x", "0", ""]);
        h.run(&["GETEX", "x"]);
        h.run(&["GETEX", "x", "PERSIST"]);
        h.run(&["GET", "x"]);
        h.run(&["INCR", "x", "x"]);
        assert_eq!(
            h.keyspace.stats.dirty, before,
            "no-op commands change nothing"
        );
        h.run(&["INCR", "x"]);
        h.run(&["INCRBYFLOAT", "x", "1"]);
        h.run(&["APPEND", "x", "0"]);
        h.run(&["SETRANGE", "x", "0", "9"]);
        h.run(&["GETEX", "x", "EX", "100"]);
        h.run(&["GETEX", "x", "PERSIST"]);
        h.run(&["GETDEL", "x"]);
        assert_eq!(h.keyspace.stats.dirty, before + 7);
    }

    #[test]
    fn table_rows_match_redis() {
        for spec in COMMANDS {
            assert_eq!(spec.group, "string", "{}", spec.name);
            assert!(!spec.summary.is_empty(), "{}", spec.name);
            let categories = spec.categories;
            assert!(categories.contains(&"string"), "{}", spec.name);
            assert_eq!(
                categories.contains(&"write"),
                spec.is_write(),
                "{}",
                spec.name
            );
            assert_eq!(
                categories.contains(&"read"),
                spec.has(READONLY),
                "{}",
                spec.name
            );
            assert_eq!(
                categories.contains(&"fast"),
                spec.has(FAST),
                "{}",
                spec.name
            );
            assert_eq!(
                categories.contains(&"slow"),
                !spec.has(FAST),
                "{}",
                spec.name
            );
        }
        let keys = |words: &[&str]| {
            let arguments: Vec<Bytes> = words
                .iter()
                .map(|word| Bytes::copy_from_slice(word.as_bytes()))
                .collect();
            resolve(&arguments)
                .unwrap()
                .key_positions(&arguments)
                .unwrap()
        };
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), vec![1, 3]);
        assert_eq!(keys(&["MGET", "a", "b", "c"]), vec![1, 2, 3]);
        assert_eq!(keys(&["LCS", "a", "b", "IDX"]), vec![1, 2]);
        assert_eq!(keys(&["SET", "a", "b", "EX", "1"]), vec![1]);
    }
}
