//! MEMORY: USAGE estimates what a key takes here; STATS, DOCTOR,
//! MALLOC-STATS and PURGE need the process and run in the node.
//!
//! The estimate is of slotraft's own layout, which is not Redis's (values are
//! stored in Rust structures, short strings inline), so the numbers differ
//! from Redis's for the same data. As in Redis, an aggregate's elements are
//! sampled (the first `SAMPLES`, 5 by default, all with `SAMPLES 0`) and their
//! average scaled to the whole value.

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::db::Entry;
use crate::hash::{HashValue, Pair};
use crate::list::ListElement;
use crate::value::{StringValue, Value, INLINE_STRING_BYTES};
use crate::{args, errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;
use std::mem::size_of;

/// Elements sampled when MEMORY USAGE names no count (Redis's
/// `OBJ_COMPUTE_SIZE_DEF_SAMPLES`).
const DEFAULT_SAMPLES: usize = 5;
/// A key's share of its database's index beyond the entry itself: the
/// table slot, its hash and the key's own allocation header.
const KEY_OVERHEAD: usize = 24;
/// An index slot of the large hash and set form, per entry (the index is kept
/// at least half empty).
const INDEX_BYTES_PER_ENTRY: usize = 16;
/// A sorted set's skiplist-form extra per member: the order-statistic tree's
/// share and the member index.
const RANKED_BYTES_PER_ENTRY: usize = 40;

const fn node_sub(
    name: &'static str,
    arity: i32,
    flags: u64,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        categories: &["slow"],
        group: "server",
        summary,
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    }
}

const MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "memory|usage",
        arity: -3,
        flags: READONLY,
        key_specs: &[KeySpec::single(2, RO)],
        categories: &["read", "slow"],
        group: "server",
        summary: "Estimates the memory usage of a key.",
        complexity: "O(N) where N is the number of samples.",
        since: "4.0.0",
        handler: Handler::Keyspace(memory_usage),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..node_sub("memory|stats", 2, 0, "Returns details about memory usage.")
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..node_sub("memory|doctor", 2, 0, "Outputs a memory problems report.")
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        ..node_sub(
            "memory|malloc-stats",
            2,
            0,
            "Returns the allocator statistics.",
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        ..node_sub(
            "memory|purge",
            2,
            0,
            "Asks the allocator to release memory.",
        )
    },
    node_sub(
        "memory|help",
        2,
        LOADING | STALE,
        "Returns helpful text about the different subcommands.",
    ),
];

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "memory",
    arity: -2,
    categories: &["slow"],
    group: "server",
    summary: "A container for memory diagnostics commands.",
    since: "4.0.0",
    subcommands: MEMORY_SUBCOMMANDS,
    handler: Handler::Container,
    ..CommandSpec::DEFAULT
}];

/// MEMORY USAGE key [SAMPLES count].
fn memory_usage(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let mut samples = DEFAULT_SAMPLES;
    let mut index = 3;
    while index < arguments.len() {
        if args::is_keyword(&arguments[index], "samples") && index + 1 < arguments.len() {
            match args::parse_i64(&arguments[index + 1]) {
                Ok(count) if count < 0 => return Frame::error(errors::SYNTAX),
                Ok(0) => samples = usize::MAX,
                Ok(count) => samples = usize::try_from(count).unwrap_or(usize::MAX),
                Err(error) => return error,
            }
            index += 2;
        } else {
            return Frame::error(errors::SYNTAX);
        }
    }
    let key = &arguments[2];
    if keyspace.read_untouched(context, key).is_none() {
        return Frame::Null;
    }
    match keyspace.db_ref(context.db).peek(key, context.now_ms) {
        Some(entry) => Frame::Integer(key_bytes(key, &entry.value, samples) as i64),
        None => Frame::Null,
    }
}

/// The estimated bytes `key` and its `value` take, sampling up to `samples`
/// elements of an aggregate.
pub fn key_bytes(key: &[u8], value: &Value, samples: usize) -> usize {
    size_of::<Entry>() + KEY_OVERHEAD + key.len() + value_bytes(value, samples)
}

/// Heap bytes an element of `length` bytes takes beyond its slot (short ones
/// are inline).
fn element_heap(length: usize) -> usize {
    if length <= INLINE_STRING_BYTES {
        0
    } else {
        length
    }
}

/// The total of `per_element` over a value of `count` elements, from the
/// average of the first `samples` of them.
fn scaled(count: usize, samples: usize, per_element: impl Iterator<Item = usize>) -> usize {
    if count == 0 {
        return 0;
    }
    let (mut seen, mut sum) = (0usize, 0usize);
    for bytes in per_element.take(samples.max(1)) {
        seen += 1;
        sum += bytes;
    }
    if seen == 0 {
        return 0;
    }
    ((sum as f64 / seen as f64) * count as f64) as usize
}

fn value_bytes(value: &Value, samples: usize) -> usize {
    match value {
        Value::String(StringValue::Bytes { data, .. }) => data.capacity(),
        Value::String(_) => 0,
        Value::List(list) => list.packed_bytes(),
        Value::Hash(hash) => {
            let pair_bytes = |pair: &Pair| {
                size_of::<Pair>()
                    + element_heap(pair.field().len())
                    + element_heap(pair.value().len())
            };
            match hash {
                HashValue::Listpack(pairs) => {
                    scaled(pairs.len(), samples, pairs.iter().map(pair_bytes))
                }
                HashValue::Table(table) => {
                    scaled(table.len(), samples, table.entries().iter().map(pair_bytes))
                        + table.len() * INDEX_BYTES_PER_ENTRY
                }
            }
        }
        Value::Set(set) => {
            let per_member = size_of::<ListElement>();
            let count = set.len();
            let members = set
                .members()
                .map(|member| per_member + element_heap(member.len()));
            match set.encoding_name() {
                "intset" => count * size_of::<i64>(),
                "hashtable" => scaled(count, samples, members) + count * INDEX_BYTES_PER_ENTRY,
                _ => scaled(count, samples, members),
            }
        }
        Value::Stream(stream) => {
            // Each entry: its ID and the field/value pointers, plus the bytes
            // they hold; each group's pending entries and consumers on top.
            let per_entry = size_of::<crate::stream::StreamId>() + 3 * size_of::<usize>();
            let count = stream.len();
            let sample_size = samples.min(count);
            let entries = stream
                .range(
                    crate::stream::StreamId { ms: 0, seq: 0 },
                    crate::stream::StreamId {
                        ms: u64::MAX,
                        seq: u64::MAX,
                    },
                    sample_size.max(1),
                    false,
                )
                .into_iter()
                .map(|(_, fields)| {
                    per_entry
                        + fields
                            .iter()
                            .map(|field| size_of::<Bytes>() + field.len())
                            .sum::<usize>()
                });
            let groups: usize = stream
                .groups
                .iter()
                .map(|(name, group)| {
                    name.len()
                        + size_of::<crate::stream::Group>()
                        + group.pending.len() * (size_of::<crate::stream::Pending>() + 32)
                        + group
                            .consumers
                            .keys()
                            .map(|consumer| consumer.len() + size_of::<crate::stream::Consumer>())
                            .sum::<usize>()
                })
                .sum();
            size_of::<crate::stream::StreamValue>() + scaled(count, samples, entries) + groups
        }
        Value::ZSet(zset) => {
            let per_entry = size_of::<crate::zset::Entry>();
            let count = zset.len();
            let entries = zset
                .iter()
                .map(|entry| per_entry + element_heap(entry.member().len()));
            let extra = if zset.encoding_name() == "skiplist" {
                count * RANKED_BYTES_PER_ENTRY
            } else {
                0
            };
            scaled(count, samples, entries) + extra
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::Harness;
    use resp::Frame;

    fn usage(h: &mut Harness, words: &[&str]) -> i64 {
        match h.run(words) {
            Frame::Integer(bytes) => bytes,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    #[test]
    fn usage_grows_with_the_data_and_answers_nil_for_a_missing_key() {
        let mut h = Harness::new();
        assert_eq!(h.run(&["memory", "usage", "missing"]), Frame::Null);
        h.set("short", "v");
        h.set("long", &"x".repeat(1000));
        let short = usage(&mut h, &["memory", "usage", "short"]);
        let long = usage(&mut h, &["memory", "usage", "long"]);
        assert!(short > 0 && long >= short + 990, "{short} {long}");
        for index in 0..300 {
            h.run(&["rpush", "list", &format!("element-{index}")]);
            h.run(&["sadd", "set", &format!("member-{index}")]);
            h.run(&["hset", "hash", &format!("field-{index}"), "value"]);
            h.run(&["zadd", "zset", &index.to_string(), &format!("m-{index}")]);
        }
        h.run(&["sadd", "ints", "1", "2", "3"]);
        for index in 1..=300 {
            h.run(&["xadd", "stream", &format!("{index}-0"), "field", "value"]);
        }
        h.run(&["xgroup", "create", "stream", "group", "0"]);
        h.run(&[
            "xreadgroup",
            "group",
            "group",
            "alice",
            "count",
            "10",
            "streams",
            "stream",
            ">",
        ]);
        for key in ["list", "set", "hash", "zset", "stream"] {
            let all = usage(&mut h, &["memory", "usage", key, "SAMPLES", "0"]);
            let sampled = usage(&mut h, &["memory", "usage", key]);
            assert!(all > 300 * 8, "{key}: {all}");
            assert!(sampled > 0, "{key}: {sampled}");
        }
        let ints = usage(&mut h, &["memory", "usage", "ints"]);
        assert!(ints > 0);
    }

    #[test]
    fn usage_arguments_are_checked_as_redis_does() {
        let mut h = Harness::new();
        h.set("k", "v");
        let syntax = Frame::error("ERR syntax error");
        assert_eq!(h.run(&["memory", "usage", "k", "SAMPLES"]), syntax);
        assert_eq!(h.run(&["memory", "usage", "k", "SAMPLES", "-1"]), syntax);
        assert_eq!(h.run(&["memory", "usage", "k", "other", "1"]), syntax);
        assert_eq!(
            h.run(&["memory", "usage", "k", "SAMPLES", "x"]),
            Frame::error("ERR value is not an integer or out of range")
        );
        assert!(matches!(
            h.run(&["memory", "usage", "k", "samples", "3"]),
            Frame::Integer(_)
        ));
    }
}
