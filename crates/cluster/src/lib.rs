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
pub fn crc16(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first
/// `}` after it, when there is at least one; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&byte| byte == b'{') {
        if let Some(length) = key[open + 1..].iter().position(|&byte| byte == b'}') {
            if length > 0 {
                return &key[open + 1..open + 1 + length];
            }
        }
    }
    key
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
