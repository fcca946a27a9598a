//! The hash slot a command addresses, from the command table's key specs: the one
//! slot all its keys hash to, none for a command without keys, or a CROSSSLOT
//! error when its keys hash to different slots (Redis Cluster's rule; a node
//! answers the error before routing or proposing anything).

use crate::command::{BeginSearch, CommandSpec, FindKeys, KeySpec};
use bytes::Bytes;

/// Redis's reply when a command's keys hash to different slots.
pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Why a command has no single slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotError {
    /// Its keys hash to different slots.
    CrossSlot,
}

impl SlotError {
    /// The error line to answer with (without the leading `-`).
    pub fn message(self) -> &'static str {
        match self {
            SlotError::CrossSlot => CROSSSLOT,
        }
    }
}

impl std::fmt::Display for SlotError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.message())
    }
}

impl std::error::Error for SlotError {}

/// The slot of `arguments` (the whole command line, name first) run as `spec` (the
/// resolved command or subcommand): `Ok(Some(slot))` when every key hashes to
/// `slot`, `Ok(None)` for a command without keys, `Err(CrossSlot)` otherwise.
///
/// Keys come from the spec's key specs, so commands with movable keys (ZUNIONSTORE's
/// numkeys, LMPOP, SINTERCARD, ...) are covered. Arguments that contradict the spec
/// (a key count that is not a number or overruns the arguments) yield no keys, as
/// in Redis: the command then runs where it is and answers its own argument error.
pub fn command_slot(spec: &CommandSpec, arguments: &[Bytes]) -> Result<Option<u16>, SlotError> {
    // Most commands name one key at a fixed place: no list of positions.
    if let (
        None,
        [KeySpec {
            begin: BeginSearch::Index(index @ 0..),
            find: FindKeys::Range { last_key: 0, .. },
            ..
        }],
    ) = (spec.get_keys, spec.key_specs)
    {
        return Ok(arguments
            .get(*index as usize)
            .map(|key| cluster::key_slot(key)));
    }
    slot_of_positions(spec, arguments)
}

/// [`command_slot`] from the spec's list of key positions.
fn slot_of_positions(spec: &CommandSpec, arguments: &[Bytes]) -> Result<Option<u16>, SlotError> {
    let Ok(positions) = spec.key_positions(arguments) else {
        return Ok(None);
    };
    let mut slot = None;
    for position in positions {
        let Some(key) = arguments.get(position) else {
            continue;
        };
        let key_slot = cluster::key_slot(key);
        match slot {
            None => slot = Some(key_slot),
            Some(first) if first != key_slot => return Err(SlotError::CrossSlot),
            Some(_) => {}
        }
    }
    Ok(slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::resolve;

    fn slot_of(words: &[&str]) -> Result<Option<u16>, SlotError> {
        let arguments: Vec<Bytes> = words
            .iter()
            .map(|word| Bytes::copy_from_slice(word.as_bytes()))
            .collect();
        let spec = resolve(&arguments).unwrap_or_else(|_| panic!("{words:?} resolves"));
        command_slot(spec, &arguments)
    }

    #[test]
    fn the_single_key_shortcut_agrees_with_the_key_positions() {
        let words = ["a", "{a}b", "c", "2", "d", "e", "f", "1", "g"];
        for spec in crate::commands::all_commands() {
            let specs = std::iter::once(spec).chain(spec.subcommands.iter());
            for spec in specs {
                for length in 1..=words.len() {
                    let arguments: Vec<Bytes> = words[..length]
                        .iter()
                        .map(|word| Bytes::copy_from_slice(word.as_bytes()))
                        .collect();
                    assert_eq!(
                        command_slot(spec, &arguments),
                        slot_of_positions(spec, &arguments),
                        "{} {length}",
                        spec.name
                    );
                }
            }
        }
    }

    #[test]
    fn single_key_commands_take_the_key_slot() {
        let vectors: &[(&str, u16)] = &[
            ("somekey", 11058),
            ("foo", 12182),
            ("FOO", 3028),
            ("x", 16287),
            ("wxz", 949),
            ("foo{hash_tag}", 2515),
            ("{user1000}.following", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("foo{bar}{zap}", 5061),
            ("", 0),
        ];
        for (key, slot) in vectors {
            assert_eq!(slot_of(&["GET", key]), Ok(Some(*slot)), "{key:?}");
            assert_eq!(slot_of(&["DEL", key]), Ok(Some(*slot)), "{key:?}");
        }
        assert_eq!(slot_of(&["SET", "foo", "bar"]), Ok(Some(12182)));
        assert_eq!(slot_of(&["HSET", "x", "foo", "bar"]), Ok(Some(16287)));
    }

    #[test]
    fn keys_in_different_slots_are_cross_slot() {
        assert_eq!(
            slot_of(&["MSET", "a", "b", "c", "d"]),
            Err(SlotError::CrossSlot)
        );
        assert_eq!(slot_of(&["MGET", "foo", "FOO"]), Err(SlotError::CrossSlot));
        assert_eq!(slot_of(&["DEL", "foo", "x"]), Err(SlotError::CrossSlot));
        assert_eq!(
            slot_of(&["RENAME", "foo", "bar"]),
            Err(SlotError::CrossSlot)
        );
        assert_eq!(
            slot_of(&["SMOVE", "{a}1", "{b}2", "m"]),
            Err(SlotError::CrossSlot)
        );
        assert_eq!(
            SlotError::CrossSlot.to_string(),
            "CROSSSLOT Keys in request don't hash to the same slot"
        );
    }

    #[test]
    fn keys_sharing_a_hash_tag_share_a_slot() {
        let slot = cluster::key_slot(b"u");
        assert_eq!(slot_of(&["MSET", "{u}a", "1", "{u}b", "2"]), Ok(Some(slot)));
        assert_eq!(slot_of(&["MGET", "{u}a", "{u}b", "u"]), Ok(Some(slot)));
        assert_eq!(
            slot_of(&["MGET", "foo{hash_tag}", "bar{hash_tag}"]),
            Ok(Some(2515))
        );
        // The same key twice is one slot.
        assert_eq!(slot_of(&["RENAME", "foo", "foo"]), Ok(Some(12182)));
        assert_eq!(
            slot_of(&["LMOVE", "{u}a", "{u}b", "LEFT", "RIGHT"]),
            Ok(Some(slot))
        );
    }

    #[test]
    fn keyless_commands_have_no_slot() {
        assert_eq!(slot_of(&["PING"]), Ok(None));
        assert_eq!(slot_of(&["DBSIZE"]), Ok(None));
        assert_eq!(slot_of(&["KEYS", "*"]), Ok(None));
        assert_eq!(slot_of(&["SCAN", "0"]), Ok(None));
        assert_eq!(slot_of(&["FLUSHDB"]), Ok(None));
        assert_eq!(slot_of(&["CLUSTER", "KEYSLOT", "foo"]), Ok(None));
        // Subcommands with a key.
        assert_eq!(slot_of(&["OBJECT", "ENCODING", "foo"]), Ok(Some(12182)));
    }

    #[test]
    fn movable_keys_come_from_the_key_specs() {
        let slot = cluster::key_slot(b"t");
        assert_eq!(
            slot_of(&[
                "ZUNIONSTORE",
                "{t}d",
                "2",
                "{t}a",
                "{t}b",
                "WEIGHTS",
                "1",
                "2"
            ]),
            Ok(Some(slot))
        );
        assert_eq!(
            slot_of(&["ZUNIONSTORE", "{t}d", "2", "{t}a", "b"]),
            Err(SlotError::CrossSlot)
        );
        // The destination counts as well.
        assert_eq!(
            slot_of(&["ZINTERSTORE", "d", "1", "{t}a"]),
            Err(SlotError::CrossSlot)
        );
        // Arguments after the counted keys are not keys.
        assert_eq!(
            slot_of(&["ZUNION", "1", "{t}a", "WEIGHTS", "foo"]),
            Ok(Some(slot))
        );
        assert_eq!(
            slot_of(&["LMPOP", "2", "{t}a", "{t}b", "LEFT"]),
            Ok(Some(slot))
        );
        assert_eq!(
            slot_of(&["LMPOP", "2", "a", "b", "LEFT"]),
            Err(SlotError::CrossSlot)
        );
        assert_eq!(
            slot_of(&["SINTERCARD", "2", "{t}a", "{t}b", "LIMIT", "5"]),
            Ok(Some(slot))
        );
        // A key count that contradicts the arguments: no keys; the command answers
        // its own error wherever it runs.
        assert_eq!(slot_of(&["LMPOP", "5", "a", "LEFT"]), Ok(None));
        assert_eq!(slot_of(&["ZUNION", "x", "a"]), Ok(None));
    }
}
