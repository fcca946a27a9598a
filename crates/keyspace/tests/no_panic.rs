//! Every keyspace command, fed random arguments drawn from a vocabulary of keys,
//! numbers at the edges of their ranges and the options commands look for, must
//! reply (a value or an error) and never panic.

use bytes::Bytes;
use keyspace::{commands, Context, Handler, Keyspace, Value};
use proptest::prelude::*;

const WORDS: &[&str] = &[
    "k",
    "k2",
    "{t}a",
    "{t}b",
    "",
    "0",
    "1",
    "-1",
    "2",
    "10",
    "-10",
    "100000000000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "1.5",
    "-0.5",
    "inf",
    "-inf",
    "nan",
    "1e308",
    "abc",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "GET",
    "KEEPTTL",
    "PERSIST",
    "MATCH",
    "COUNT",
    "TYPE",
    "string",
    "*",
    "REPLACE",
    "ABSTTL",
    "IDLETIME",
    "FREQ",
    "DB",
    "LEN",
    "IDX",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "ASYNC",
    "SYNC",
    "ENCODING",
    "REFCOUNT",
    "HELP",
    "INFO",
    "DOCS",
    "GETKEYS",
    "LIST",
    "FILTERBY",
    "PATTERN",
    "ACLCAT",
    "set",
    "mset",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "0.001",
    "1e-3",
    "0x1p-3",
    "WITHVALUES",
    "LIMIT",
    "NOVALUES",
    "f",
    "4611686018427387904",
    "-4611686018427387905",
    "WITHSCORES",
    "WITHSCORE",
    "BYSCORE",
    "BYLEX",
    "REV",
    "CH",
    "INCR",
    "MIN",
    "MAX",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "(1",
    "(",
    "[a",
    "-",
    "+",
    "+inf",
    "-9223372036854775807",
    "BY",
    "ASC",
    "DESC",
    "ALPHA",
    "STORE",
    "nosort",
    "#",
    "k*",
    "*->f",
    "{t}*",
    "GETREG",
    "DECODE",
    "TODENSE",
    // Stream words.
    "STREAMS",
    "GROUP",
    "g",
    "c",
    "$",
    ">",
    "~",
    "=",
    "1-1",
    "0-0",
    "5-*",
    "(1-1",
    "18446744073709551615-18446744073709551615",
    "MINID",
    "NOMKSTREAM",
    "MKSTREAM",
    "ENTRIESREAD",
    "ENTRIESADDED",
    "MAXDELETEDID",
    "BLOCK",
    "NOACK",
    "IDLE",
    "TIME",
    "RETRYCOUNT",
    "FORCE",
    "JUSTID",
    "LASTID",
    "FULL",
    // HyperLogLog-looking strings: a sparse value whose opcodes cover too few
    // registers, one with VAL opcodes (U+0080 encodes as C2 80), and a dense
    // header on a string of the wrong length.
    "HYLL\u{1}\0\0\0\0\0\0\0\0\0\0\0\u{7f}\u{7f}",
    "HYLL\u{1}\0\0\0\0\0\0\0\0\0\0\0\u{80}\u{7f}\u{7f}\u{80}",
    "HYLL\0\0\0\0\0\0\0\0\0\0\0\0",
];

fn command_names() -> Vec<String> {
    let mut names = Vec::new();
    for spec in commands::all_commands() {
        match spec.handler {
            Handler::Keyspace(_) => names.push(spec.name.to_string()),
            Handler::Container => {
                for sub in spec.subcommands {
                    if matches!(sub.handler, Handler::Keyspace(_)) {
                        names.push(sub.name.replace('|', " "));
                    }
                }
            }
            Handler::Node => {}
        }
    }
    names
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    #[test]
    fn random_arguments_never_panic(
        script in proptest::collection::vec(
            (any::<proptest::sample::Index>(), proptest::collection::vec(0..WORDS.len(), 0..7)),
            1..40,
        ),
        seed in any::<u64>(),
    ) {
        let names = command_names();
        let mut keyspace = Keyspace::new(16, seed);
        let mut context = Context::new(1_700_000_000_000, seed);
        for (which, words) in script {
            let name = which.get(&names);
            let mut arguments: Vec<Bytes> =
                name.split(' ').map(|part| Bytes::copy_from_slice(part.as_bytes())).collect();
            arguments.extend(words.iter().map(|&index| Bytes::from_static(WORDS[index].as_bytes())));
            if let Ok(spec) = commands::resolve(&arguments) {
                let _ = keyspace.execute(spec, &mut context, &arguments);
                if let Some(block) = &context.block {
                    prop_assert!(spec.has(keyspace::command::flags::BLOCKING));
                    prop_assert!(!block.keys.is_empty());
                }
            }
            // Lists, hashes, sets and sorted sets are never left empty; sorted
            // sets keep their invariants.
            for db in keyspace.dbs() {
                for (key, entry) in db.entries() {
                    let empty = match &entry.value {
                        Value::List(list) => list.is_empty(),
                        Value::Hash(hash) => hash.is_empty(),
                        Value::Set(set) => set.is_empty(),
                        Value::ZSet(zset) => zset.is_empty(),
                        // Streams are kept when empty, as in Redis.
                        Value::String(_) | Value::Stream(_) => false,
                    };
                    prop_assert!(!empty, "{:?} is an empty {}", key, entry.value.type_name());
                    if let Value::ZSet(zset) = &entry.value {
                        prop_assert_eq!(zset.check(), Ok(()), "{:?}", key);
                    }
                }
            }
            context.now_ms += 7;
        }
    }
}
