//! String commands.

use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::value::{StringValue, Value};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::Frame;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: READONLY | FAST,
        key_specs: &[KeySpec::single(1, RO | ACCESS)],
        categories: &["read", "string", "fast"],
        group: "string",
        summary: "Returns the string value of a key.",
        handler: Handler::Keyspace(get),
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
        handler: Handler::Keyspace(set),
        ..CommandSpec::DEFAULT
    },
];

/// The string stored at `key`, `Ok(None)` when absent, WRONGTYPE for other types.
pub(crate) fn read_string<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut StringValue>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => match &mut entry.value {
            Value::String(string) => Ok(Some(string)),
            #[allow(unreachable_patterns)]
            _ => Err(Frame::error(errors::WRONGTYPE)),
        },
    }
}

fn get(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_string(keyspace, context, &arguments[1]) {
        Ok(Some(string)) => Frame::Bulk(string.to_bytes()),
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn set(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    if arguments.len() != 3 {
        return Frame::error(errors::SYNTAX);
    }
    keyspace.set(context, &arguments[1], Value::string(&arguments[2]), None);
    Frame::OK
}
