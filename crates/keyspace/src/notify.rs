//! Keyspace notifications (`notify-keyspace-events`): which events a command
//! raises, by Redis's flag letters.
//!
//! The keyspace only records events (while some class is enabled); the node
//! publishes them on `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`.
//! Events are not replicated state: every replica records the events of what
//! it applies, as every Redis replica notifies its own subscribers.
//!
//! Event names follow Redis for the common commands (`set`, `del`, `expire`,
//! `incrby`, `lpush`, `hset`, `zadd`, `rename_from`/`rename_to`, `expired`,
//! `new` ...); other writes raise their command name. A write raises its event
//! for a key only when the command changed something and the key existed
//! before or exists after it; a key a write emptied also raises `del`.

use bytes::Bytes;

/// Most events kept between two drains; a node drains after every batch,
/// so the bound only matters to a caller that never does.
pub const MAX_EVENTS: usize = 1 << 20;

/// Event classes, as bits.
pub mod class {
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const MODULE: u32 = 1 << 12;
    pub const NEW: u32 = 1 << 13;
    /// `A`: every class but `m` and `n`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Letters in the order Redis prints them back.
const LETTERS: &[(char, u32)] = &[
    ('g', class::GENERIC),
    ('$', class::STRING),
    ('l', class::LIST),
    ('s', class::SET),
    ('h', class::HASH),
    ('z', class::ZSET),
    ('x', class::EXPIRED),
    ('e', class::EVICTED),
    ('t', class::STREAM),
    ('m', class::KEY_MISS),
    ('d', class::MODULE),
    ('n', class::NEW),
];

/// Parses `notify-keyspace-events`; `None` for an unknown letter.
pub fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for letter in text.chars() {
        flags |= match letter {
            'A' => class::ALL,
            'K' => class::KEYSPACE,
            'E' => class::KEYEVENT,
            other => LETTERS.iter().find(|(known, _)| *known == other)?.1,
        };
    }
    Some(flags)
}

/// The flags as CONFIG GET prints them (`AKE`, `gxE` ...).
pub fn flags_text(flags: u32) -> String {
    let mut text = String::new();
    if flags & class::ALL == class::ALL {
        text.push('A');
    } else {
        for (letter, bit) in LETTERS {
            if *bit & class::ALL != 0 && flags & bit != 0 {
                text.push(*letter);
            }
        }
    }
    for (letter, bit) in [
        ('K', class::KEYSPACE),
        ('E', class::KEYEVENT),
        ('m', class::KEY_MISS),
        ('n', class::NEW),
    ] {
        if flags & bit != 0 {
            text.push(letter);
        }
    }
    text
}

/// Whether `flags` publish anything at all (a channel kind and a class).
pub fn publishes(flags: u32) -> bool {
    flags & (class::KEYSPACE | class::KEYEVENT) != 0
        && flags & !(class::KEYSPACE | class::KEYEVENT) != 0
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub db: usize,
    pub class: u32,
    pub name: &'static str,
    pub key: Bytes,
}

/// The class of a command's events, from its group.
pub fn class_of(group: &str) -> u32 {
    match group {
        "string" | "hyperloglog" | "bitmap" => class::STRING,
        "list" => class::LIST,
        "set" => class::SET,
        "hash" => class::HASH,
        "sorted_set" | "geo" => class::ZSET,
        "stream" => class::STREAM,
        _ => class::GENERIC,
    }
}

/// Whether a command writes its destination whole from what it reads (the
/// STORE forms, BITOP): an empty result deletes the destination, raising
/// `del` alone.
pub fn replaces_destination(command: &str) -> bool {
    matches!(
        command,
        "sinterstore"
            | "sunionstore"
            | "sdiffstore"
            | "zunionstore"
            | "zinterstore"
            | "zdiffstore"
            | "zrangestore"
            | "sort"
            | "bitop"
            | "georadius"
            | "georadiusbymember"
            | "geosearchstore"
    )
}

/// Whether a command's events come destination first: a list move notifies
/// its push before its pop, as Redis does.
pub fn destination_first(command: &str) -> bool {
    matches!(command, "lmove" | "blmove" | "rpoplpush" | "brpoplpush")
}

/// The event a write raises for the key at `index` among its keys (0 for
/// the first key), given the command's `arguments`.
pub fn event_name(command: &'static str, index: usize, arguments: &[Bytes]) -> &'static str {
    let left = |position: usize| {
        arguments
            .get(position)
            .is_some_and(|word| word.eq_ignore_ascii_case(b"LEFT"))
    };
    match command {
        "setex" | "psetex" | "setnx" | "getset" | "mset" | "msetnx" => "set",
        "incr" => "incrby",
        "decr" => "decrby",
        "unlink" | "getdel" => "del",
        "pexpire" | "expireat" | "pexpireat" => "expire",
        "hmset" | "hsetnx" => "hset",
        "zincrby" => "zincr",
        "pfmerge" => "pfadd",
        "bitfield" => "setbit",
        "geoadd" => "zadd",
        "georadius" | "georadiusbymember" => "georadiusstore",
        "bitop" => "set",
        "sort" => "sortstore",
        "rename" | "renamenx" => {
            if index == 0 {
                "rename_from"
            } else {
                "rename_to"
            }
        }
        // Only the destination changes (the source is read).
        "copy" => "copy_to",
        "rpoplpush" | "brpoplpush" => {
            if index == 0 {
                "rpop"
            } else {
                "lpush"
            }
        }
        "lmove" | "blmove" => match (index, left(3), left(4)) {
            (0, true, _) => "lpop",
            (0, false, _) => "rpop",
            (_, _, true) => "lpush",
            (_, _, false) => "rpush",
        },
        "smove" => {
            if index == 0 {
                "srem"
            } else {
                "sadd"
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_print_as_redis() {
        assert_eq!(parse_flags(""), Some(0));
        assert_eq!(parse_flags("KEA").map(flags_text).as_deref(), Some("AKE"));
        assert_eq!(parse_flags("Egx").map(flags_text).as_deref(), Some("gxE"));
        assert_eq!(parse_flags("nK").map(flags_text).as_deref(), Some("Kn"));
        assert_eq!(parse_flags("Kq"), None);
        assert!(publishes(parse_flags("KA").unwrap()));
        assert!(!publishes(parse_flags("K").unwrap()));
        assert!(!publishes(parse_flags("g").unwrap()));
    }
}
