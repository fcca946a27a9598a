//! Redis Cluster commands. CLUSTER KEYSLOT, COUNTKEYSINSLOT and GETKEYSINSLOT
//! only need the keyspace (the latter two read the per-slot key index, see
//! `slot_index.rs`); the other CLUSTER subcommands and ASKING describe the topology
//! or connection state and are `Handler::Node` rows the node answers.

use crate::command::{flags::*, CommandSpec, Handler};
use crate::{args, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

/// Redis's reply to CLUSTER COUNTKEYSINSLOT with a slot out of range.
pub const INVALID_SLOT: &str = "ERR Invalid slot";
/// Redis's reply to CLUSTER GETKEYSINSLOT with a slot out of range or a negative
/// count.
pub const INVALID_SLOT_OR_COUNT: &str = "ERR Invalid slot or number of keys";

const ADMIN_CATEGORIES: &[&str] = &["admin", "slow", "dangerous"];
/// Flags of the subcommands that change the cluster configuration.
const CONFIGURE: u64 = NO_ASYNC_LOADING | ADMIN | STALE;
const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u64,
    since: &'static str,
    complexity: &'static str,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        categories: if flags & ADMIN != 0 {
            ADMIN_CATEGORIES
        } else {
            &["slow"]
        },
        group: "cluster",
        since,
        complexity,
        summary,
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    }
}

const fn nondeterministic(spec: CommandSpec) -> CommandSpec {
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..spec
    }
}

const fn keyspace(
    spec: CommandSpec,
    run: fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame,
) -> CommandSpec {
    CommandSpec {
        handler: Handler::Keyspace(run),
        ..spec
    }
}

const N_SLOTS: &str = "O(N) where N is the total number of hash slot arguments";
const N_RANGES: &str =
    "O(N) where N is the total number of the slots between the start slot and end slot arguments.";
const N_NODES: &str = "O(N) where N is the total number of Cluster nodes";

/// CLUSTER's subcommands as Redis 7.2 lists them, in its (alphabetical) order.
const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "cluster|addslots",
        -3,
        CONFIGURE,
        "3.0.0",
        N_SLOTS,
        "Assigns new hash slots to a node.",
    ),
    sub(
        "cluster|addslotsrange",
        -4,
        CONFIGURE,
        "7.0.0",
        N_RANGES,
        "Assigns new hash slot ranges to a node.",
    ),
    sub(
        "cluster|bumpepoch",
        2,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Advances the cluster config epoch.",
    ),
    nondeterministic(sub(
        "cluster|count-failure-reports",
        3,
        ADMIN | STALE,
        "3.0.0",
        "O(N) where N is the number of failure reports",
        "Returns the number of active failure reports active for a node.",
    )),
    keyspace(
        sub(
            "cluster|countkeysinslot",
            3,
            STALE,
            "3.0.0",
            "O(1)",
            "Returns the number of keys in a hash slot.",
        ),
        count_keys_in_slot,
    ),
    sub(
        "cluster|delslots",
        -3,
        CONFIGURE,
        "3.0.0",
        N_SLOTS,
        "Sets hash slots as unbound for a node.",
    ),
    sub(
        "cluster|delslotsrange",
        -4,
        CONFIGURE,
        "7.0.0",
        N_RANGES,
        "Sets hash slot ranges as unbound for a node.",
    ),
    sub(
        "cluster|failover",
        -2,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Forces a replica to perform a manual failover of its master.",
    ),
    sub(
        "cluster|flushslots",
        2,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Deletes all slots information from a node.",
    ),
    sub(
        "cluster|forget",
        3,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Removes a node from the nodes table.",
    ),
    keyspace(
        nondeterministic(sub(
            "cluster|getkeysinslot",
            4,
            STALE,
            "3.0.0",
            "O(N) where N is the number of requested keys",
            "Returns the key names in a hash slot.",
        )),
        get_keys_in_slot,
    ),
    sub(
        "cluster|help",
        2,
        LOADING | STALE,
        "5.0.0",
        "O(1)",
        "Returns helpful text about the different subcommands.",
    ),
    nondeterministic(sub(
        "cluster|info",
        2,
        STALE,
        "3.0.0",
        "O(1)",
        "Returns information about the state of a node.",
    )),
    keyspace(
        sub(
            "cluster|keyslot",
            3,
            STALE,
            "3.0.0",
            "O(N) where N is the number of bytes in the key",
            "Returns the hash slot for a key.",
        ),
        key_slot,
    ),
    nondeterministic(sub(
        "cluster|links",
        2,
        STALE,
        "7.0.0",
        N_NODES,
        "Returns a list of all TCP links to and from peer nodes.",
    )),
    sub(
        "cluster|meet",
        -4,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Forces a node to handshake with another node.",
    ),
    sub(
        "cluster|myid",
        2,
        STALE,
        "3.0.0",
        "O(1)",
        "Returns the ID of a node.",
    ),
    nondeterministic(sub(
        "cluster|myshardid",
        2,
        STALE,
        "7.2.0",
        "O(1)",
        "Returns the shard ID of a node.",
    )),
    nondeterministic(sub(
        "cluster|nodes",
        2,
        STALE,
        "3.0.0",
        N_NODES,
        "Returns the cluster configuration for a node.",
    )),
    nondeterministic(sub(
        "cluster|replicas",
        3,
        ADMIN | STALE,
        "5.0.0",
        "O(N) where N is the number of replicas.",
        "Lists the replica nodes of a master node.",
    )),
    sub(
        "cluster|replicate",
        3,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Configure a node as replica of a master node.",
    ),
    sub(
        "cluster|reset",
        -2,
        ADMIN | STALE | NOSCRIPT,
        "3.0.0",
        "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
        "Resets a node.",
    ),
    sub(
        "cluster|saveconfig",
        2,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Forces a node to save the cluster configuration to disk.",
    ),
    sub(
        "cluster|set-config-epoch",
        3,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Sets the configuration epoch for a new node.",
    ),
    sub(
        "cluster|setslot",
        -4,
        CONFIGURE,
        "3.0.0",
        "O(1)",
        "Binds a hash slot to a node.",
    ),
    nondeterministic(sub(
        "cluster|shards",
        2,
        STALE,
        "7.0.0",
        "O(N) where N is the total number of cluster nodes",
        "Returns the mapping of cluster slots to shards.",
    )),
    nondeterministic(sub(
        "cluster|slaves",
        3,
        ADMIN | STALE,
        "3.0.0",
        "O(N) where N is the number of replicas.",
        "Lists the replica nodes of a master node.",
    )),
    nondeterministic(sub(
        "cluster|slots",
        2,
        LOADING | STALE,
        "3.0.0",
        N_NODES,
        "Returns the mapping of cluster slots to nodes.",
    )),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "cluster",
        arity: -2,
        categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        complexity: "Depends on subcommand.",
        summary: "A container for Redis Cluster commands.",
        subcommands: CLUSTER_SUBCOMMANDS,
        handler: Handler::Container,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "asking",
        arity: 1,
        flags: FAST,
        categories: &["fast", "connection"],
        group: "cluster",
        since: "3.0.0",
        summary: "Signals that a cluster client is following an -ASK redirect.",
        handler: Handler::Node,
        ..CommandSpec::DEFAULT
    },
];

/// A slot argument: Redis's integer error for a non-number, None when out of
/// range.
fn parse_slot(argument: &[u8]) -> Result<Option<u16>, Frame> {
    let slot = args::parse_i64(argument)?;
    Ok(u16::try_from(slot)
        .ok()
        .filter(|&slot| slot < cluster::SLOTS))
}

fn key_slot(_: &mut Keyspace, _: &mut Context, arguments: &[Bytes]) -> Frame {
    Frame::Integer(cluster::key_slot(&arguments[2]) as i64)
}

fn count_keys_in_slot(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
) -> Frame {
    match parse_slot(&arguments[2]) {
        Ok(Some(slot)) => Frame::Integer(keyspace.count_keys_in_slot(context.db, slot) as i64),
        Ok(None) => Frame::error(INVALID_SLOT),
        Err(error) => error,
    }
}

fn get_keys_in_slot(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // Both arguments are parsed before either is range-checked, as in Redis.
    let slot = match parse_slot(&arguments[2]) {
        Ok(slot) => slot,
        Err(error) => return error,
    };
    let count = match args::parse_i64(&arguments[3]) {
        Ok(count) => count,
        Err(error) => return error,
    };
    let (Some(slot), Ok(count)) = (slot, usize::try_from(count)) else {
        return Frame::error(INVALID_SLOT_OR_COUNT);
    };
    Frame::Array(
        keyspace
            .keys_in_slot(context.db, slot, None, count)
            .into_iter()
            .map(Frame::Bulk)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Harness;
    use bytes::BytesMut;
    use resp::Protocol;

    /// Runs `words` and returns the reply as the client reads it in `protocol`.
    fn wire(h: &mut Harness, protocol: Protocol, words: &[&str]) -> String {
        h.context.protocol = protocol;
        let reply = h.run(words);
        let mut out = BytesMut::new();
        resp::encode(&reply, protocol, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    /// Request lines and the exact bytes answered, the same in RESP2 and RESP3
    /// (these replies are integers, errors and arrays of bulk strings).
    fn transcript(slot_u: &str) -> Vec<(Vec<&str>, String)> {
        vec![
            (vec!["CLUSTER", "KEYSLOT", "somekey"], ":11058\r\n".into()),
            (
                vec!["cluster", "keyslot", "foo{hash_tag}"],
                ":2515\r\n".into(),
            ),
            (vec!["CLUSTER", "KEYSLOT", ""], ":0\r\n".into()),
            (vec!["CLUSTER", "COUNTKEYSINSLOT", slot_u], ":3\r\n".into()),
            (vec!["CLUSTER", "COUNTKEYSINSLOT", "12182"], ":1\r\n".into()),
            (vec!["CLUSTER", "COUNTKEYSINSLOT", "0"], ":0\r\n".into()),
            (vec!["CLUSTER", "COUNTKEYSINSLOT", "16383"], ":0\r\n".into()),
            (
                vec!["CLUSTER", "COUNTKEYSINSLOT", "16384"],
                "-ERR Invalid slot\r\n".into(),
            ),
            (
                vec!["CLUSTER", "COUNTKEYSINSLOT", "-1"],
                "-ERR Invalid slot\r\n".into(),
            ),
            (
                vec!["CLUSTER", "COUNTKEYSINSLOT", "x"],
                "-ERR value is not an integer or out of range\r\n".into(),
            ),
            (
                vec!["CLUSTER", "COUNTKEYSINSLOT"],
                "-ERR wrong number of arguments for 'cluster|countkeysinslot' command\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", slot_u, "10"],
                "*3\r\n$4\r\n{u}a\r\n$4\r\n{u}b\r\n$4\r\n{u}c\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", slot_u, "2"],
                "*2\r\n$4\r\n{u}a\r\n$4\r\n{u}b\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", slot_u, "0"],
                "*0\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "12182", "9223372036854775807"],
                "*1\r\n$3\r\nfoo\r\n".into(),
            ),
            (vec!["CLUSTER", "GETKEYSINSLOT", "0", "5"], "*0\r\n".into()),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
                "-ERR Invalid slot or number of keys\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
                "-ERR Invalid slot or number of keys\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "-5", "x"],
                "-ERR value is not an integer or out of range\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "x", "1"],
                "-ERR value is not an integer or out of range\r\n".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "1"],
                "-ERR wrong number of arguments for 'cluster|getkeysinslot' command\r\n".into(),
            ),
            (
                vec!["CLUSTER", "NOPE"],
                "-ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.\r\n".into(),
            ),
        ]
    }

    fn fill(h: &mut Harness) {
        for key in ["{u}c", "{u}a", "foo", "{u}b", "x"] {
            h.set(key, "v");
        }
    }

    #[test]
    fn transcripts_in_both_protocols_with_and_without_the_index() {
        for indexed in [false, true] {
            for protocol in [Protocol::Resp2, Protocol::Resp3] {
                let mut h = Harness::new();
                if indexed {
                    h.keyspace.enable_slot_index();
                }
                fill(&mut h);
                let slot_u = cluster::key_slot(b"u").to_string();
                for (words, expected) in transcript(&slot_u) {
                    assert_eq!(
                        wire(&mut h, protocol, &words),
                        expected,
                        "{words:?} {protocol:?} indexed: {indexed}"
                    );
                }
            }
        }
    }

    #[test]
    fn counts_follow_the_selected_database_and_deletions() {
        let mut h = Harness::new();
        h.keyspace.enable_slot_index();
        fill(&mut h);
        let slot = cluster::key_slot(b"u").to_string();
        h.context.db = 1;
        assert_eq!(
            h.run(&["CLUSTER", "COUNTKEYSINSLOT", &slot]),
            Frame::Integer(0)
        );
        h.context.db = 0;
        assert_eq!(h.run(&["DEL", "{u}a", "{u}b"]), Frame::Integer(2));
        assert_eq!(
            h.run(&["CLUSTER", "COUNTKEYSINSLOT", &slot]),
            Frame::Integer(1)
        );
        assert_eq!(
            h.run(&["CLUSTER", "GETKEYSINSLOT", &slot, "5"]),
            Frame::Array(vec![Frame::bulk("{u}c")])
        );
    }

    #[test]
    fn node_subcommands_are_in_the_table() {
        for name in [
            "SLOTS",
            "SHARDS",
            "NODES",
            "INFO",
            "MYID",
            "MYSHARDID",
            "RESET",
            "COUNT-FAILURE-REPORTS",
            "SETSLOT",
            "HELP",
        ] {
            let spec = crate::commands::lookup(b"cluster")
                .and_then(|cluster| crate::commands::lookup_subcommand(cluster, name.as_bytes()))
                .unwrap_or_else(|| panic!("CLUSTER {name}"));
            assert!(matches!(spec.handler, Handler::Node), "{name}");
            assert!(!spec.is_write(), "{name}");
        }
        for name in ["asking", "readonly", "readwrite"] {
            let spec = crate::commands::lookup(name.as_bytes()).expect(name);
            assert!(matches!(spec.handler, Handler::Node), "{name}");
            assert_eq!(spec.group, "cluster", "{name}");
        }
    }
}
