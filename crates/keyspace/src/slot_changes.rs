//! The keys changed in hash slots that are being copied to another shard
//! while they still take writes (see `slotraft cluster reshard`): the copy
//! runs first, then the slot is frozen and only the keys recorded here are
//! copied again (or deleted on the target when they are gone here).
//!
//! Recording is conservative: every lookup for writing notes its key, whether
//! or not the command then changes it, and so may a read on the leader. A
//! recorded key that did not change is copied once more, which is harmless;
//! a changed key that is not recorded would be lost, so every path that
//! changes a stored key goes through a database method that notes it.
//!
//! The record is derived state, kept by each replica as it applies its log,
//! and not part of snapshots (a clone starts without it): a replica that
//! loaded a snapshot, or a record that outgrew its bound, knows no changes
//! for the slot, and the migration then copies the whole frozen slot again
//! instead (see [`SlotChanges::keys`]).

use bytes::Bytes;
use std::collections::{BTreeSet, HashMap};

/// Keys recorded per slot before the record is given up (the slot then
/// counts as untracked).
const MAX_KEYS_PER_SLOT: usize = 1 << 20;

/// See the module documentation.
#[derive(Default)]
pub struct SlotChanges {
    /// Tracked slots and the keys changed in each, in byte order.
    slots: HashMap<u16, BTreeSet<Bytes>>,
}

impl Clone for SlotChanges {
    /// A copy (a snapshot's) records nothing: see the module documentation.
    fn clone(&self) -> Self {
        SlotChanges::default()
    }
}

impl SlotChanges {
    /// Starts recording the changes of `slot`; true when it starts afresh,
    /// false when the slot was already tracked (its record goes on).
    pub fn track(&mut self, slot: u16) -> bool {
        match self.slots.entry(slot) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(vacant) => {
                vacant.insert(BTreeSet::new());
                true
            }
        }
    }

    /// Stops recording `slot` and forgets its record.
    pub fn forget(&mut self, slot: u16) {
        self.slots.remove(&slot);
    }

    /// Forgets every record (the database was emptied at once).
    pub fn forget_all(&mut self) {
        self.slots.clear();
    }

    /// Notes that `key` may change. Nearly free while no slot is tracked.
    #[inline]
    pub fn note(&mut self, key: &[u8]) {
        if !self.slots.is_empty() {
            Self::note_in(&mut self.slots, key);
        }
    }

    #[cold]
    fn note_in(slots: &mut HashMap<u16, BTreeSet<Bytes>>, key: &[u8]) {
        let slot = cluster::key_slot(key);
        let Some(keys) = slots.get_mut(&slot) else {
            return;
        };
        if keys.contains(key) {
            return;
        }
        if keys.len() >= MAX_KEYS_PER_SLOT {
            slots.remove(&slot);
            return;
        }
        keys.insert(Bytes::copy_from_slice(key));
    }

    /// Up to `count` recorded keys of `slot` in byte order after `after`
    /// (from the first when None); None when the slot is not tracked, so
    /// its changes are unknown.
    pub fn keys(&self, slot: u16, after: Option<&[u8]>, count: usize) -> Option<Vec<Bytes>> {
        use std::ops::Bound;
        let keys = self.slots.get(&slot)?;
        let start = match after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        Some(
            keys.range::<[u8], _>((start, Bound::Unbounded))
                .take(count)
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tracked_slots_record_and_a_clone_knows_nothing() {
        let mut changes = SlotChanges::default();
        changes.note(b"foo");
        let slot = cluster::key_slot(b"foo");
        assert_eq!(changes.keys(slot, None, 10), None);
        assert!(changes.track(slot));
        assert!(!changes.track(slot));
        changes.note(b"foo");
        changes.note(b"foo");
        changes.note(b"bar");
        let other = cluster::key_slot(b"{foo}2");
        assert_eq!(other, slot);
        changes.note(b"{foo}2");
        assert_eq!(
            changes.keys(slot, None, 10),
            Some(vec![
                Bytes::from_static(b"foo"),
                Bytes::from_static(b"{foo}2")
            ])
        );
        assert_eq!(
            changes.keys(slot, Some(b"foo"), 10),
            Some(vec![Bytes::from_static(b"{foo}2")])
        );
        assert_eq!(changes.clone().keys(slot, None, 10), None);
        changes.forget(slot);
        assert_eq!(changes.keys(slot, None, 10), None);
    }
}
