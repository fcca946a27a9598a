//! The command table, assembled from one slice per command family, and command
//! resolution (name, subcommand, arity) with Redis's error texts.

pub mod bitmaps;
pub mod cluster;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod keys;
pub mod lists;
pub mod memory;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
mod typed;
pub mod zsets;

use crate::command::CommandSpec;
use crate::errors;
use bytes::Bytes;
use resp::Frame;
use std::sync::OnceLock;

/// Every family's commands. Adding a family means adding its slice here.
pub const FAMILIES: &[&[CommandSpec]] = &[
    strings::COMMANDS,
    bitmaps::COMMANDS,
    lists::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    streams::COMMANDS,
    geo::COMMANDS,
    hyperloglog::COMMANDS,
    pubsub::COMMANDS,
    keys::COMMANDS,
    sort::COMMANDS,
    scripting::COMMANDS,
    server::COMMANDS,
    memory::COMMANDS,
    cluster::COMMANDS,
];

/// Every top-level command, in table order.
pub fn all_commands() -> impl Iterator<Item = &'static CommandSpec> {
    FAMILIES.iter().flat_map(|family| family.iter())
}

/// Slots in the name index: a power of two well above the command count, so
/// linear probing almost always finds a name at its first slot.
const INDEX_SLOTS: usize = 1024;

fn name_hash(name: &[u8]) -> usize {
    // FNV-1a over the lowercase name; the index is built once, so any stable hash
    // with few collisions among command names will do.
    let mut hash: u32 = 0x811c_9dc5;
    for &byte in name {
        hash ^= byte as u32;
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash as usize
}

fn name_index() -> &'static [Option<&'static CommandSpec>] {
    static INDEX: OnceLock<Vec<Option<&'static CommandSpec>>> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut index = vec![None; INDEX_SLOTS];
        for spec in all_commands() {
            let mut slot = name_hash(spec.name.as_bytes()) % INDEX_SLOTS;
            while index[slot].is_some() {
                slot = (slot + 1) % INDEX_SLOTS;
            }
            index[slot] = Some(spec);
        }
        index
    })
}

/// Lowercases a command name into `buffer` if it fits (every real name does).
fn lowercase<'a>(name: &[u8], buffer: &'a mut [u8; 64]) -> Option<&'a [u8]> {
    let target = buffer.get_mut(..name.len())?;
    for (slot, byte) in target.iter_mut().zip(name) {
        *slot = byte.to_ascii_lowercase();
    }
    Some(target)
}

/// The top-level command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut buffer = [0u8; 64];
    let name = lowercase(name, &mut buffer)?;
    let index = name_index();
    let mut slot = name_hash(name) % INDEX_SLOTS;
    loop {
        let spec = index[slot]?;
        if spec.name.as_bytes() == name {
            return Some(spec);
        }
        slot = (slot + 1) % INDEX_SLOTS;
    }
}

/// The subcommand `name` of `container` (any case).
pub fn lookup_subcommand(
    container: &'static CommandSpec,
    name: &[u8],
) -> Option<&'static CommandSpec> {
    container.subcommands.iter().find(|sub| {
        sub.name
            .split_once('|')
            .is_some_and(|(_, sub_name)| sub_name.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// Finds the spec that executes `arguments` (descending into subcommands) and
/// checks its arity, answering with Redis's exact errors.
pub fn resolve(arguments: &[Bytes]) -> Result<&'static CommandSpec, Frame> {
    let name = &arguments[0];
    let Some(spec) = lookup(name) else {
        return Err(unknown_command(arguments));
    };
    if spec.subcommands.is_empty() {
        check_arity(spec, arguments.len())?;
        return Ok(spec);
    }
    if arguments.len() < 2 {
        // A container runs itself only when its arity allows no subcommand
        // (COMMAND's -1); the others (CLUSTER, CONFIG, ...) need one.
        check_arity(spec, arguments.len())?;
        if spec.arity != -1 {
            return Err(Frame::error_owned(errors::wrong_arity(spec.name)));
        }
        return Ok(spec);
    }
    let Some(sub) = lookup_subcommand(spec, &arguments[1]) else {
        return Err(Frame::error_owned(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            sanitize(&arguments[1], 128),
            spec.name.to_ascii_uppercase()
        )));
    };
    check_arity(sub, arguments.len())?;
    Ok(sub)
}

fn check_arity(spec: &CommandSpec, count: usize) -> Result<(), Frame> {
    let arity = spec.arity;
    let count = count as i32;
    if (arity > 0 && arity != count) || (arity < 0 && count < -arity) {
        return Err(Frame::error_owned(errors::wrong_arity(spec.name)));
    }
    Ok(())
}

/// Redis's text for an unknown command, quoting up to ~128 bytes of arguments.
pub fn unknown_command(arguments: &[Bytes]) -> Frame {
    let mut quoted = String::new();
    for argument in &arguments[1..] {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        quoted.push('\'');
        quoted.push_str(&sanitize(argument, room));
        quoted.push_str("' ");
    }
    Frame::error_owned(format!(
        "ERR unknown command '{}', with args beginning with: {}",
        sanitize(&arguments[0], 128),
        quoted
    ))
}

/// Argument text fit for an error line: at most `limit` bytes, newlines as spaces.
fn sanitize(argument: &[u8], limit: usize) -> String {
    let shown = &argument[..argument.len().min(limit)];
    String::from_utf8_lossy(shown).replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arguments(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|word| Bytes::copy_from_slice(word.as_bytes()))
            .collect()
    }

    fn error_text(words: &[&str]) -> String {
        match resolve(&arguments(words)) {
            Err(Frame::Error(text)) => String::from_utf8(text.to_vec()).unwrap(),
            _ => panic!("expected an error for {words:?}"),
        }
    }

    #[test]
    fn table_names_are_unique_and_lowercase() {
        let mut names: Vec<_> = all_commands().map(|spec| spec.name).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate command names");
        for spec in all_commands() {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            let found = lookup(spec.name.to_ascii_uppercase().as_bytes()).expect("indexed");
            assert_eq!(found.name, spec.name);
            for sub in spec.subcommands {
                assert!(
                    sub.name.starts_with(&format!("{}|", spec.name)),
                    "{}",
                    sub.name
                );
            }
        }
    }

    #[test]
    fn resolution_errors_match_redis() {
        assert_eq!(
            error_text(&["foo", "a", "b"]),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            error_text(&["foo"]),
            "ERR unknown command 'foo', with args beginning with: "
        );
        assert_eq!(
            error_text(&["GET"]),
            "ERR wrong number of arguments for 'get' command"
        );
        assert!(resolve(&arguments(&["gEt", "k"])).is_ok());
        // Bare COMMAND runs the container itself (redis-py's RedisCluster sends
        // it first); containers that need a subcommand refuse to.
        assert_eq!(
            resolve(&arguments(&["command"])).map(|spec| spec.name).ok(),
            Some("command")
        );
        assert_eq!(
            error_text(&["CONFIG"]),
            "ERR wrong number of arguments for 'config' command"
        );
    }
}
