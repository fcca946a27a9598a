//! The per-slot key index of one database: for each of the 16384 hash slots, its
//! keys in byte order, so CLUSTER COUNTKEYSINSLOT is O(1) and listing a slot's
//! keys (CLUSTER GETKEYSINSLOT, moving a slot's keys to another shard in
//! batches) never scans the whole database.
//!
//! Each slot's keys are one ordered set behind an `Arc` (absent while the slot
//! holds none). A clone of the index (part of a snapshot's copy of the
//! keyspace) shares every set; the first change to a slot afterwards copies that
//! slot's set alone. A cursor is simply the last key returned: the next batch
//! starts strictly after it, and keys added or removed meanwhile never make a
//! walk skip a key that was present throughout.
//!
//! Cost: per key one allocation of its length plus its share of B-tree nodes
//! (about 20–30 bytes), and a fixed 128 KB of set pointers per database.
//!
//! **Architecture Invariant:** when a database has an index, it holds exactly the
//! database's stored keys (expired ones not reclaimed yet included, as DBSIZE
//! counts them); [`SlotIndex::matches`] recomputes it from the table to check.

use bytes::Bytes;
use cluster::{key_slot, SLOTS};
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::snapshot_copies::SnapshotCopies;

type SlotKeys = Arc<BTreeSet<Box<[u8]>>>;

/// See the module documentation.
pub struct SlotIndex {
    /// The keys of each slot; None for a slot without keys.
    slots: Box<[Option<SlotKeys>]>,
    /// Keys indexed, over all slots.
    len: usize,
    /// As the key tables' (see [`crate::dict::Dict::clone_tracked`]): the
    /// slot sets copied while the latest tracked clone shared them.
    copies: SnapshotCopies,
}

/// Estimated bytes of one key in a slot's set: the boxed key, its pointer
/// and length, and a share of the tree's node.
fn set_bytes(keys: &BTreeSet<Box<[u8]>>) -> u64 {
    keys.iter().map(|key| (key.len() + 32) as u64).sum()
}

impl Clone for SlotIndex {
    fn clone(&self) -> Self {
        SlotIndex {
            slots: self.slots.clone(),
            len: self.len,
            copies: SnapshotCopies::default(),
        }
    }
}

impl PartialEq for SlotIndex {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.slots == other.slots
    }
}

impl Eq for SlotIndex {}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex::new()
    }
}

impl std::fmt::Debug for SlotIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SlotIndex")
            .field("keys", &self.len)
            .finish()
    }
}

impl SlotIndex {
    /// An empty index.
    pub fn new() -> Self {
        SlotIndex {
            slots: vec![None; SLOTS as usize].into_boxed_slice(),
            len: 0,
            copies: SnapshotCopies::default(),
        }
    }

    /// A clone whose slot sets, once this index changes them and so copies
    /// them, count in [`SlotIndex::snapshot_copy_bytes`] while it lives.
    pub fn clone_tracked(&mut self) -> Self {
        let copies = self.copies.track();
        SlotIndex {
            copies,
            ..self.clone()
        }
    }

    /// Estimated bytes of the slot sets copied since the latest tracked
    /// clone was made, while it lives.
    pub fn snapshot_copy_bytes(&self) -> u64 {
        self.copies.bytes()
    }

    /// Counts `keys` as left to the tracked clone, if one shares them.
    fn count_shared(copies: &SnapshotCopies, keys: &SlotKeys) {
        copies.count_if_shared(keys, || set_bytes(keys));
    }

    /// An index of `keys`.
    pub fn from_keys<'k>(keys: impl Iterator<Item = &'k [u8]>) -> Self {
        let mut index = SlotIndex::new();
        for key in keys {
            index.insert(key);
        }
        index
    }

    /// Records a key added to the database.
    pub fn insert(&mut self, key: &[u8]) {
        let keys = self.slots[key_slot(key) as usize].get_or_insert_with(Default::default);
        Self::count_shared(&self.copies, keys);
        if Arc::make_mut(keys).insert(key.into()) {
            self.len += 1;
        } else {
            debug_assert!(false, "slot index: key inserted twice");
        }
    }

    /// Records a key removed from the database.
    pub fn remove(&mut self, key: &[u8]) {
        let entry = &mut self.slots[key_slot(key) as usize];
        let removed = match entry {
            Some(keys) if keys.contains(key) => {
                Self::count_shared(&self.copies, keys);
                let keys = Arc::make_mut(keys);
                keys.remove(key);
                if keys.is_empty() {
                    *entry = None;
                }
                true
            }
            _ => false,
        };
        if removed {
            self.len -= 1;
        } else {
            debug_assert!(false, "slot index: removed key was not indexed");
        }
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        for keys in self.slots.iter().flatten() {
            Self::count_shared(&self.copies, keys);
        }
        self.slots.fill(None);
        self.len = 0;
    }

    /// Keys indexed, over all slots.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keys in `slot` (0 for a slot out of range).
    pub fn count(&self, slot: u16) -> usize {
        match self.slots.get(slot as usize) {
            Some(Some(keys)) => keys.len(),
            _ => 0,
        }
    }

    /// Up to `count` keys of `slot` in byte order, starting after `after` (from
    /// the first when None).
    pub fn keys(&self, slot: u16, after: Option<&[u8]>, count: usize) -> Vec<Bytes> {
        use std::ops::Bound;
        let Some(Some(keys)) = self.slots.get(slot as usize) else {
            return Vec::new();
        };
        let start = match after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        keys.range::<[u8], _>((start, Bound::Unbounded))
            .take(count)
            .map(|stored| Bytes::copy_from_slice(stored))
            .collect()
    }

    /// Whether the index holds exactly `keys` (each once) with matching counts.
    pub fn matches<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) -> bool {
        *self == SlotIndex::from_keys(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(keys: &[&str]) -> Vec<Bytes> {
        keys.iter()
            .map(|key| Bytes::copy_from_slice(key.as_bytes()))
            .collect()
    }

    #[test]
    fn counts_and_lists_by_slot() {
        let mut index = SlotIndex::new();
        for key in ["{u}c", "{u}a", "foo", "{u}b", "x"] {
            index.insert(key.as_bytes());
        }
        let slot = key_slot(b"{u}a");
        assert_eq!(index.count(slot), 3);
        assert_eq!(index.count(12182), 1, "foo");
        assert_eq!(index.count(16287), 1, "x");
        assert_eq!(index.len(), 5);
        assert_eq!(index.keys(slot, None, 10), bytes(&["{u}a", "{u}b", "{u}c"]));
        assert_eq!(index.keys(slot, None, 2), bytes(&["{u}a", "{u}b"]));
        assert_eq!(index.keys(slot, Some(b"{u}b"), 10), bytes(&["{u}c"]));
        assert_eq!(
            index.keys(slot, Some(b"{u}a0"), 10),
            bytes(&["{u}b", "{u}c"])
        );
        assert_eq!(index.keys(slot, Some(b"{u}c"), 10), bytes(&[]));
        assert_eq!(index.keys(slot, None, 0), bytes(&[]));
        assert_eq!(index.keys(16383, None, 10), bytes(&[]));
        assert_eq!(index.keys(16287, None, 10), bytes(&["x"]));
        assert_eq!(index.keys(SLOTS, None, 10), bytes(&[]));
        assert_eq!(index.count(SLOTS), 0);
        index.remove(b"{u}b");
        assert_eq!(index.count(slot), 2);
        assert_eq!(index.keys(slot, Some(b"{u}a"), 10), bytes(&["{u}c"]));
        assert!(index.matches(["x", "foo", "{u}c", "{u}a"].iter().map(|k| k.as_bytes())));
        assert!(!index.matches(["x", "foo", "{u}c"].iter().map(|k| k.as_bytes())));
        index.clear();
        assert!(index.is_empty());
        assert_eq!(index.count(slot), 0);
    }

    /// A clone shares each slot's keys until either side changes that slot.
    #[test]
    fn slot_sets_copied_under_a_tracked_clone_are_counted_until_it_goes() {
        let mut index = SlotIndex::from_keys(
            ["{a}1", "{a}2", "{a}3", "{b}1"]
                .iter()
                .map(|key| key.as_bytes()),
        );
        let snapshot = index.clone_tracked();
        assert_eq!(index.snapshot_copy_bytes(), 0);
        // Adding to slot {a} copies its three keys' set, once.
        index.insert(b"{a}4");
        index.insert(b"{a}5");
        assert_eq!(index.snapshot_copy_bytes(), 3 * (4 + 32));
        // Removing from slot {b} copies its set.
        index.remove(b"{b}1");
        assert_eq!(index.snapshot_copy_bytes(), 4 * (4 + 32));
        assert_eq!(snapshot.len(), 4);
        drop(snapshot);
        assert_eq!(index.snapshot_copy_bytes(), 0);
        let _plain = index.clone();
        index.insert(b"{a}6");
        assert_eq!(index.snapshot_copy_bytes(), 0);
    }

    #[test]
    fn clones_are_independent() {
        let mut index = SlotIndex::from_keys(["{u}a", "{u}b", "foo"].iter().map(|k| k.as_bytes()));
        let copy = index.clone();
        index.insert(b"{u}c");
        index.remove(b"foo");
        let slot = key_slot(b"{u}a");
        assert_eq!(copy.keys(slot, None, 10), bytes(&["{u}a", "{u}b"]));
        assert_eq!(copy.count(12182), 1);
        assert_eq!(copy.len(), 3);
        assert_eq!(index.keys(slot, None, 10), bytes(&["{u}a", "{u}b", "{u}c"]));
        assert_eq!(index.count(12182), 0);
        assert!(index.matches(["{u}c", "{u}b", "{u}a"].iter().map(|k| k.as_bytes())));
    }

    #[test]
    fn the_empty_key_and_the_last_slot_are_indexed() {
        let mut index = SlotIndex::new();
        index.insert(b"");
        assert_eq!(index.count(0), 1);
        assert_eq!(index.keys(0, None, 5), bytes(&[""]));
        // Find a key in the last slot and check the range end there.
        let key = (0u32..)
            .map(|n| format!("k{n}"))
            .find(|key| key_slot(key.as_bytes()) == SLOTS - 1)
            .unwrap();
        index.insert(key.as_bytes());
        assert_eq!(index.keys(SLOTS - 1, None, 5), bytes(&[key.as_str()]));
        assert_eq!(index.count(SLOTS - 1), 1);
    }
}
