//! Generic key commands.

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::{Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "del",
        arity: -2,
        flags: WRITE,
        key_specs: &[KeySpec::range(1, -1, 1, RM | DELETE)],
        categories: &["keyspace", "write", "slow"],
        summary: "Deletes one or more keys.",
        complexity: "O(N) where N is the number of keys that will be removed.",
        handler: Handler::Keyspace(del),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exists",
        arity: -2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::range(1, -1, 1, RO)],
        categories: &["keyspace", "read", "fast"],
        summary: "Determines whether one or more keys exist.",
        since: "1.0.0",
        complexity: "O(N) where N is the number of keys to check.",
        handler: Handler::Keyspace(exists),
        ..CommandSpec::DEFAULT
    },
];

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
        .filter(|key| keyspace.read(context, key).is_some())
        .count();
    Frame::Integer(found as i64)
}
