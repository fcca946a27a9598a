//! Property test: after any sequence of commands (every path that creates, moves or
//! deletes keys: writes, RENAME, MOVE, COPY, SWAPDB, RESTORE, FLUSHDB/FLUSHALL,
//! lazy and active expiry), the per-slot key index equals one rebuilt from the
//! tables, a keyspace without the index answers every command (the CLUSTER slot
//! commands included) identically, and a snapshot round trip keeps the index.

use bytes::Bytes;
use keyspace::snapshot::{read_snapshot, write_snapshot};
use keyspace::{commands, Context, Keyspace, KeyspaceConfig};
use proptest::prelude::*;
use resp::Frame;

const KEYS: &[&str] = &["a", "b", "{t}1", "{t}2", "{t}3", "x", "foo", "{x}"];
const DATABASES: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    /// A command line.
    Command(Vec<String>),
    /// DUMP the first key, RESTORE it under the second (REPLACE).
    DumpRestore(usize, usize),
    /// Time moves on.
    Advance(u64),
    /// An active-expiry pass.
    ActiveExpire,
    /// Select another database.
    Select(usize),
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| part.to_string()).collect()
}

fn step() -> impl Strategy<Value = Step> {
    let db = 0..DATABASES;
    let ttl = 1u64..50;
    prop_oneof![
        4 => key().prop_map(|k| Step::Command(words(&["SET", &k, "v"]))),
        2 => (key(), ttl.clone())
            .prop_map(|(k, ttl)| Step::Command(words(&["SET", &k, "v", "PX", &ttl.to_string()]))),
        2 => (key(), ttl.clone())
            .prop_map(|(k, ttl)| Step::Command(words(&["PEXPIRE", &k, &ttl.to_string()]))),
        2 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["DEL", &k, &j]))),
        1 => key().prop_map(|k| Step::Command(words(&["GETDEL", &k]))),
        1 => key().prop_map(|k| Step::Command(words(&["GET", &k]))),
        2 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["RENAME", &k, &j]))),
        1 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["RENAMENX", &k, &j]))),
        2 => (key(), db.clone())
            .prop_map(|(k, db)| Step::Command(words(&["MOVE", &k, &db.to_string()]))),
        1 => (key(), key(), db.clone()).prop_map(|(k, j, db)| {
            Step::Command(words(&["COPY", &k, &j, "DB", &db.to_string(), "REPLACE"]))
        }),
        1 => (db.clone(), db.clone()).prop_map(|(first, second)| {
            Step::Command(words(&["SWAPDB", &first.to_string(), &second.to_string()]))
        }),
        1 => (key(), key()).prop_map(|(k, j)| Step::DumpRestore(
            KEYS.iter().position(|name| *name == k).unwrap(),
            KEYS.iter().position(|name| *name == j).unwrap(),
        )),
        2 => (key(), prop::bool::ANY).prop_map(|(k, left)| {
            Step::Command(words(&[if left { "LPUSH" } else { "RPOP" }, &k, "e"]))
        }),
        1 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["LMOVE", &k, &j, "LEFT", "RIGHT"]))),
        2 => (key(), prop::bool::ANY).prop_map(|(k, add)| {
            Step::Command(words(&[if add { "SADD" } else { "SREM" }, &k, "m"]))
        }),
        1 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["SINTERSTORE", &k, &j]))),
        1 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["SMOVE", &k, &j, "m"]))),
        1 => (key(), prop::bool::ANY).prop_map(|(k, add)| {
            Step::Command(if add { words(&["HSET", &k, "f", "v"]) } else { words(&["HDEL", &k, "f"]) })
        }),
        1 => (key(), prop::bool::ANY).prop_map(|(k, add)| {
            Step::Command(if add { words(&["ZADD", &k, "1", "m"]) } else { words(&["ZREM", &k, "m"]) })
        }),
        1 => (key(), key()).prop_map(|(k, j)| Step::Command(words(&["ZUNIONSTORE", &k, "1", &j]))),
        1 => key().prop_map(|k| Step::Command(words(&["GETEX", &k, "PERSIST"]))),
        1 => key().prop_map(|k| Step::Command(words(&["APPEND", &k, "z"]))),
        1 => Just(Step::Command(words(&["RANDOMKEY"]))),
        1 => Just(Step::Command(words(&["FLUSHDB"]))),
        1 => Just(Step::Command(words(&["FLUSHALL"]))),
        2 => key().prop_map(|k| {
            let slot = cluster::key_slot(k.as_bytes()).to_string();
            Step::Command(words(&["CLUSTER", "COUNTKEYSINSLOT", &slot]))
        }),
        2 => key().prop_map(|k| {
            let slot = cluster::key_slot(k.as_bytes()).to_string();
            Step::Command(words(&["CLUSTER", "GETKEYSINSLOT", &slot, "10"]))
        }),
        3 => ttl.prop_map(Step::Advance),
        1 => Just(Step::ActiveExpire),
        1 => db.prop_map(Step::Select),
    ]
}

fn run(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match commands::resolve(arguments) {
        Ok(spec) => keyspace.execute(spec, context, arguments),
        Err(error) => error,
    }
}

fn arguments(words: &[String]) -> Vec<Bytes> {
    words
        .iter()
        .map(|word| Bytes::copy_from_slice(word.as_bytes()))
        .collect()
}

/// The index of every database equals its recomputation, and answers as the
/// unindexed twin's full pass does for every slot that any test key maps to.
fn check(indexed: &Keyspace, plain: &Keyspace) -> Result<(), TestCaseError> {
    prop_assert!(indexed.has_slot_index());
    for (db, (with_index, without)) in indexed.dbs().iter().zip(plain.dbs()).enumerate() {
        prop_assert!(with_index.slot_index_is_exact(), "db {}", db);
        for key in KEYS {
            let slot = cluster::key_slot(key.as_bytes());
            prop_assert_eq!(
                with_index.count_keys_in_slot(slot),
                without.count_keys_in_slot(slot)
            );
            prop_assert_eq!(
                with_index.keys_in_slot(slot, None, 100),
                without.keys_in_slot(slot, None, 100)
            );
            prop_assert_eq!(
                with_index.keys_in_slot(slot, Some(key.as_bytes()), 2),
                without.keys_in_slot(slot, Some(key.as_bytes()), 2)
            );
            prop_assert_eq!(
                indexed.slot_is_empty(db, slot),
                with_index.count_keys_in_slot(slot) == 0
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn the_slot_index_stays_exact(
        steps in proptest::collection::vec(step(), 1..150),
        seed in any::<u64>(),
        index_from_start in any::<bool>(),
    ) {
        let mut indexed = Keyspace::new(DATABASES, seed);
        let mut plain = Keyspace::new(DATABASES, seed);
        if index_from_start {
            indexed.enable_slot_index();
        }
        let mut context = Context::new(1_700_000_000_000, seed);
        let mut plain_context = context.clone();
        for (number, step) in steps.iter().enumerate() {
            if !index_from_start && number == steps.len() / 2 {
                indexed.enable_slot_index();
            }
            match step {
                Step::Command(words) => {
                    let arguments = arguments(words);
                    let reply = run(&mut indexed, &mut context, &arguments);
                    let expected = run(&mut plain, &mut plain_context, &arguments);
                    prop_assert_eq!(reply, expected, "{:?}", words);
                }
                Step::DumpRestore(from, to) => {
                    let dump = arguments(&words(&["DUMP", KEYS[*from]]));
                    let payload = run(&mut indexed, &mut context, &dump);
                    prop_assert_eq!(&payload, &run(&mut plain, &mut plain_context, &dump));
                    if let Frame::Bulk(payload) = payload {
                        let restore = vec![
                            Bytes::from_static(b"RESTORE"),
                            Bytes::copy_from_slice(KEYS[*to].as_bytes()),
                            Bytes::from_static(b"0"),
                            payload,
                            Bytes::from_static(b"REPLACE"),
                        ];
                        let reply = run(&mut indexed, &mut context, &restore);
                        prop_assert_eq!(reply, run(&mut plain, &mut plain_context, &restore));
                    }
                }
                Step::Advance(millis) => {
                    context.now_ms += millis;
                    plain_context.now_ms += millis;
                }
                Step::ActiveExpire => {
                    prop_assert_eq!(
                        indexed.active_expire_cycle(context.now_ms),
                        plain.active_expire_cycle(context.now_ms)
                    );
                }
                Step::Select(db) => {
                    context.db = *db;
                    plain_context.db = *db;
                }
            }
            if indexed.has_slot_index() {
                check(&indexed, &plain)?;
            }
        }
        // A snapshot round trip keeps the index, exact.
        let mut data = Vec::new();
        write_snapshot(&indexed, &mut data).unwrap();
        let loaded = read_snapshot(&mut &data[..], KeyspaceConfig::default()).unwrap();
        check(&loaded, &plain)?;
    }
}
