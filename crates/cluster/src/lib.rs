//! Hash slots: CRC16/XMODEM of the key (or of its `{hash tag}`) modulo 16384,
//! exactly as Redis Cluster computes them, and the cluster topology
//! (`topology`) with the views the CLUSTER commands answer from (`view`).

pub mod topology;
pub mod view;

#[cfg(test)]
mod topology_tests;
#[cfg(test)]
mod view_tests;

pub use topology::{Leader, Migration, NodeInfo, Shard, SlotMap, SlotRange, Topology};
pub use view::{Endpoint, ShardNode, ShardView, SlotsRange};

/// Number of hash slots.
pub const SLOTS: u16 = 16384;

/// CRC16/XMODEM: polynomial 0x1021, initial value 0, no reflection, no final xor.
///
/// Every request's slot is hashed on its way in (on a node and again on the
/// router), so this takes two bytes per step through two tables instead of
/// one byte per step; the `crc16` crate is the tests' reference.
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    let mut pairs = data.chunks_exact(2);
    for pair in &mut pairs {
        let both = crc ^ u16::from_be_bytes([pair[0], pair[1]]);
        crc = CRC_TABLES[1][usize::from(both >> 8)] ^ CRC_TABLES[0][usize::from(both & 0xff)];
    }
    for &byte in pairs.remainder() {
        crc = (crc << 8) ^ CRC_TABLES[0][usize::from((crc >> 8) as u8 ^ byte)];
    }
    crc
}

/// `[0][b]`: the CRC of byte `b` (one step); `[1][b]`: the CRC of `b`
/// followed by a zero byte (two steps), for a pair's first byte.
static CRC_TABLES: [[u16; 256]; 2] = crc_tables();

const fn crc_tables() -> [[u16; 256]; 2] {
    let mut tables = [[0u16; 256]; 2];
    let mut byte = 0;
    while byte < 256 {
        let mut crc = (byte as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        tables[0][byte] = crc;
        byte += 1;
    }
    let mut byte = 0;
    while byte < 256 {
        let once = tables[0][byte];
        tables[1][byte] = (once << 8) ^ tables[0][(once >> 8) as usize];
        byte += 1;
    }
    tables
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first
/// `}` after it, when there is at least one; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = first_open_brace(key) {
        if let Some(length) = key[open + 1..].iter().position(|&byte| byte == b'}') {
            if length > 0 {
                return &key[open + 1..open + 1 + length];
            }
        }
    }
    key
}

/// Where the first `{` is, looking at eight bytes per step (most keys have
/// none, so the whole key is searched).
fn first_open_brace(key: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = key.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        // A zero byte of `x` marks a `{`; the classic test flags it (and
        // may flag a byte after a real one, never one before).
        let x = u64::from_le_bytes(bytes) ^ (ONES * u64::from(b'{'));
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&byte| byte == b'{')
        .map(|offset| at + offset)
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    proptest::proptest! {
        #[test]
        fn crc16_matches_the_reference(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            proptest::prop_assert_eq!(crc16(&data), crc16::State::<crc16::XMODEM>::calculate(&data));
        }

        #[test]
        fn the_first_brace_is_found_wherever_it_is(
            data in proptest::collection::vec(proptest::prop_oneof![
                proptest::prelude::Just(b'{'),
                proptest::prelude::Just(b'{' + 1),
                proptest::prelude::Just(b'{' - 1),
                proptest::prelude::Just(b'{' ^ 0x80),
                proptest::prelude::any::<u8>(),
            ], 0..40)
        ) {
            proptest::prop_assert_eq!(
                first_open_brace(&data),
                data.iter().position(|&byte| byte == b'{')
            );
        }
    }

    #[test]
    fn published_slot_vectors() {
        let vectors: &[(&str, u16)] = &[
            ("somekey", 11058),
            ("foo", 12182),
            ("FOO", 3028),
            ("x", 16287),
            ("wxz", 949),
            ("foo{hash_tag}", 2515),
            ("bar{hash_tag}", 2515),
            ("{user1000}.following", 3443),
            ("foo{}{bar}", 8363),
            ("foo{{bar}}zap", 4015),
            ("foo{bar}{zap}", 5061),
            ("", 0),
        ];
        for (key, slot) in vectors {
            assert_eq!(key_slot(key.as_bytes()), *slot, "slot of {key:?}");
        }
    }

    #[test]
    fn hash_tag_rules() {
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"{"), b"{");
        assert_eq!(hash_tag(b"a}b{c"), b"a}b{c");
    }
}
