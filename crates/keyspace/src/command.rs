//! The one declarative command table's types: name, arity, flags, key specs, ACL
//! categories and docs for every command. The table drives arity errors, "is this a
//! write" (and so what goes through the log), key extraction for routing and slot
//! checks, and COMMAND INFO / DOCS / GETKEYS / LIST.

use crate::{Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

/// What executes a command.
#[derive(Clone, Copy)]
pub enum Handler {
    /// A pure keyspace command.
    Keyspace(fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame),
    /// Handled by the node (connection state, configuration, server lifecycle).
    Node,
    /// A container whose subcommands carry the handlers (CONFIG, OBJECT, ...).
    Container,
}

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    pub const WRITE: u64 = 1 << 0;
    pub const READONLY: u64 = 1 << 1;
    pub const DENYOOM: u64 = 1 << 2;
    pub const ADMIN: u64 = 1 << 3;
    pub const PUBSUB: u64 = 1 << 4;
    pub const NOSCRIPT: u64 = 1 << 5;
    pub const BLOCKING: u64 = 1 << 6;
    pub const LOADING: u64 = 1 << 7;
    pub const STALE: u64 = 1 << 8;
    pub const SKIP_MONITOR: u64 = 1 << 9;
    pub const SKIP_SLOWLOG: u64 = 1 << 10;
    pub const ASKING: u64 = 1 << 11;
    pub const FAST: u64 = 1 << 12;
    pub const NO_AUTH: u64 = 1 << 13;
    pub const MAY_REPLICATE: u64 = 1 << 14;
    pub const NO_MANDATORY_KEYS: u64 = 1 << 15;
    pub const NO_ASYNC_LOADING: u64 = 1 << 16;
    pub const NO_MULTI: u64 = 1 << 17;
    pub const ALLOW_BUSY: u64 = 1 << 18;
    pub const SENTINEL: u64 = 1 << 19;
    pub const PROTECTED: u64 = 1 << 20;
    /// Not a Redis flag (COMMAND INFO does not show it): the command changes
    /// replicated state though Redis does not call it a write (EVAL, FCALL,
    /// SCRIPT LOAD, SCRIPT FLUSH), so it runs through the log.
    pub const LOGGED: u64 = 1 << 40;

    /// Names in the order Redis lists them.
    pub const NAMES: &[(u64, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (SENTINEL, "sentinel"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (PROTECTED, "protected"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key-spec flags, as COMMAND INFO names them.
pub mod key_flags {
    pub const RO: u32 = 1 << 0;
    pub const RW: u32 = 1 << 1;
    pub const OW: u32 = 1 << 2;
    pub const RM: u32 = 1 << 3;
    pub const ACCESS: u32 = 1 << 4;
    pub const UPDATE: u32 = 1 << 5;
    pub const INSERT: u32 = 1 << 6;
    pub const DELETE: u32 = 1 << 7;
    pub const NOT_KEY: u32 = 1 << 8;
    pub const INCOMPLETE: u32 = 1 << 9;
    pub const VARIABLE_FLAGS: u32 = 1 << 10;

    pub const NAMES: &[(u32, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where the search for keys begins.
#[derive(Debug, Clone, Copy)]
pub enum BeginSearch {
    /// At a fixed argument index.
    Index(i32),
    /// After the first occurrence of a keyword, searching from `start_from`
    /// (negative: from the end, backwards).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    /// Keys whose place cannot be described (SORT's BY/GET patterns and STORE);
    /// the command's own key finder ([`CommandSpec::get_keys`]) locates them.
    Unknown,
}

/// How keys are found from the beginning.
#[derive(Debug, Clone, Copy)]
pub enum FindKeys {
    /// Keys up to `last_key` (relative to the beginning; -1 is the last argument),
    /// every `step` arguments; `limit` > 1 takes only 1/limit of the remaining ones.
    Range {
        last_key: i32,
        step: i32,
        limit: i32,
    },
    /// The argument at `key_num_index` (relative) says how many keys follow,
    /// starting at `first_key` (relative), every `step` arguments.
    KeyNum {
        key_num_index: i32,
        first_key: i32,
        step: i32,
    },
    /// See [`BeginSearch::Unknown`].
    Unknown,
}

#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// Redis's explanation of an unusual spec, shown by COMMAND INFO ("" for none).
    pub notes: &'static str,
    pub flags: u32,
    pub begin: BeginSearch,
    pub find: FindKeys,
}

impl KeySpec {
    /// One key at `index`.
    pub const fn single(index: i32, flags: u32) -> KeySpec {
        KeySpec {
            notes: "",
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key: 0,
                step: 1,
                limit: 0,
            },
        }
    }

    /// Keys from `index` to `last_key` (relative), every `step`.
    pub const fn range(index: i32, last_key: i32, step: i32, flags: u32) -> KeySpec {
        KeySpec {
            notes: "",
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key,
                step,
                limit: 0,
            },
        }
    }

    /// Keys found only by the command's key finder, with Redis's note on why.
    pub const fn unknown(flags: u32, notes: &'static str) -> KeySpec {
        KeySpec {
            notes,
            flags,
            begin: BeginSearch::Unknown,
            find: FindKeys::Unknown,
        }
    }

    /// The same spec with Redis's note on it.
    pub const fn with_notes(self, notes: &'static str) -> KeySpec {
        KeySpec { notes, ..self }
    }

    /// A count at `index`, then that many keys right after it.
    pub const fn counted(index: i32, flags: u32) -> KeySpec {
        KeySpec {
            notes: "",
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::KeyNum {
                key_num_index: 0,
                first_key: 1,
                step: 1,
            },
        }
    }
}

/// One command (or subcommand) of the table.
#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Lowercase name (`get`; subcommands: `encoding`).
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments including the name; -N at least N.
    pub arity: i32,
    pub flags: u64,
    pub key_specs: &'static [KeySpec],
    /// ACL categories without the `@` (`read`, `string`, `fast`).
    pub categories: &'static [&'static str],
    /// Command tips for clients (`nondeterministic_output`, `request_policy:all_shards`).
    pub tips: &'static [&'static str],
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    pub subcommands: &'static [CommandSpec],
    pub handler: Handler,
    /// The command's own key finder (Redis's `getkeys_proc`), for commands whose
    /// key specs cannot place every key (SORT's STORE destination): positions
    /// and key-spec flags. When set, it replaces the specs for key extraction.
    pub get_keys: Option<KeyFinder>,
}

/// A command's own key finder: the key positions in the arguments, each with its
/// key-spec flags.
pub type KeyFinder = fn(&[Bytes]) -> Vec<(usize, u32)>;

/// Redis's ACL categories, in its order.
pub const ACL_CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

impl CommandSpec {
    /// Defaults for struct-update syntax in the table.
    pub const DEFAULT: CommandSpec = CommandSpec {
        name: "",
        arity: 1,
        flags: 0,
        key_specs: &[],
        categories: &[],
        tips: &[],
        group: "generic",
        summary: "",
        since: "1.0.0",
        complexity: "O(1)",
        subcommands: &[],
        handler: Handler::Node,
        get_keys: None,
    };

    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// Whether the command may change replicated state, and so runs through
    /// the log: a write, or a [`flags::LOGGED`] command.
    pub fn through_log(&self) -> bool {
        self.flags & (flags::WRITE | flags::LOGGED) != 0
    }

    pub fn has(&self, flag: u64) -> bool {
        self.flags & flag != 0
    }

    /// Its ACL categories, in Redis's order: those the table names and those
    /// Redis implies from the flags (`write`, `read`, `admin` and `dangerous`,
    /// `pubsub`, `fast` or else `slow`, `blocking`).
    pub fn acl_categories(&self) -> Vec<&'static str> {
        let mut implied: Vec<&'static str> = Vec::new();
        if self.has(flags::WRITE) {
            implied.push("write");
        }
        if self.has(flags::READONLY) && !self.categories.contains(&"scripting") {
            implied.push("read");
        }
        if self.has(flags::ADMIN) {
            implied.extend(["admin", "dangerous"]);
        }
        if self.has(flags::PUBSUB) {
            implied.push("pubsub");
        }
        implied.push(if self.has(flags::FAST) {
            "fast"
        } else {
            "slow"
        });
        if self.has(flags::BLOCKING) {
            implied.push("blocking");
        }
        ACL_CATEGORIES
            .iter()
            .copied()
            .filter(|category| self.categories.contains(category) || implied.contains(category))
            .collect()
    }

    /// Whether the keys cannot be found from fixed positions alone.
    pub fn has_movable_keys(&self) -> bool {
        self.key_specs.iter().any(|spec| {
            !matches!(
                (spec.begin, spec.find),
                (BeginSearch::Index(_), FindKeys::Range { .. })
            )
        })
    }

    /// Redis's legacy (first key, last key, step) triple derived from the key specs.
    pub fn legacy_key_range(&self) -> (i32, i32, i32) {
        let mut first = 0;
        let mut last = 0;
        let mut step = 0;
        for spec in self.key_specs {
            let (
                BeginSearch::Index(index),
                FindKeys::Range {
                    last_key,
                    step: spec_step,
                    ..
                },
            ) = (spec.begin, spec.find)
            else {
                continue;
            };
            if first == 0 {
                first = index;
                step = spec_step;
                last = if last_key < 0 {
                    last_key
                } else {
                    index + last_key
                };
            } else if last >= 0 && index == last + 1 && step == 1 && spec_step == 1 {
                // A range continuing the previous one (SINTERSTORE's sources
                // after its destination) extends it, to the end if open.
                last = if last_key < 0 {
                    last_key
                } else {
                    index + last_key
                };
            }
        }
        (first, last, step)
    }

    /// Argument indexes holding keys, each with its key-spec flags.
    pub fn key_positions_with_flags(
        &self,
        arguments: &[Bytes],
    ) -> Result<Vec<(usize, u32)>, KeyExtractionError> {
        if let Some(get_keys) = self.get_keys {
            return Ok(get_keys(arguments));
        }
        let mut found = Vec::new();
        let mut positions = Vec::new();
        for spec in self.key_specs {
            positions.clear();
            extract_keys(spec, arguments, &mut positions)?;
            found.extend(positions.iter().map(|&position| (position, spec.flags)));
        }
        Ok(found)
    }

    /// Argument indexes holding keys, from the key specs. Errors when the arguments
    /// contradict the spec (a key count that does not fit).
    pub fn key_positions(&self, arguments: &[Bytes]) -> Result<Vec<usize>, KeyExtractionError> {
        if let Some(get_keys) = self.get_keys {
            return Ok(get_keys(arguments)
                .into_iter()
                .map(|(position, _)| position)
                .collect());
        }
        let mut positions = Vec::new();
        for spec in self.key_specs {
            extract_keys(spec, arguments, &mut positions)?;
        }
        Ok(positions)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyExtractionError {
    /// The key count argument is not a number or does not fit the arguments.
    BadKeyCount,
}

fn extract_keys(
    spec: &KeySpec,
    arguments: &[Bytes],
    positions: &mut Vec<usize>,
) -> Result<(), KeyExtractionError> {
    let count = arguments.len() as i64;
    let begin = match spec.begin {
        BeginSearch::Index(index) => index as i64,
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            let found = if start_from >= 0 {
                (start_from as i64..count).find(|&index| {
                    arguments[index as usize].eq_ignore_ascii_case(keyword.as_bytes())
                })
            } else {
                (1..=count + start_from as i64).rev().find(|&index| {
                    arguments[index as usize].eq_ignore_ascii_case(keyword.as_bytes())
                })
            };
            match found {
                Some(index) => index + 1,
                None => return Ok(()),
            }
        }
        BeginSearch::Unknown => return Ok(()),
    };
    if begin >= count {
        return Ok(());
    }
    match spec.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            let last = if last_key >= 0 {
                (begin + last_key as i64).min(count - 1)
            } else {
                let from_end = count + last_key as i64;
                if limit > 1 {
                    begin + (from_end - begin + 1) / limit as i64 - 1
                } else {
                    from_end
                }
            };
            let mut index = begin;
            while index <= last {
                positions.push(index as usize);
                index += step.max(1) as i64;
            }
        }
        FindKeys::KeyNum {
            key_num_index,
            first_key,
            step,
        } => {
            let count_index = (begin + key_num_index as i64) as usize;
            let key_count = arguments
                .get(count_index)
                .and_then(|argument| std::str::from_utf8(argument).ok())
                .and_then(|text| text.parse::<i64>().ok())
                .ok_or(KeyExtractionError::BadKeyCount)?;
            if key_count < 0 {
                return Err(KeyExtractionError::BadKeyCount);
            }
            let first = begin + first_key as i64;
            let step = step.max(1) as i64;
            let last = first + (key_count - 1) * step;
            if key_count > 0 && last >= count {
                return Err(KeyExtractionError::BadKeyCount);
            }
            let mut index = first;
            for _ in 0..key_count {
                positions.push(index as usize);
                index += step;
            }
        }
        FindKeys::Unknown => {}
    }
    Ok(())
}
