//! Counting the memory a snapshot's copy of the keyspace holds alone.
//!
//! A snapshot takes its copy by cloning the key tables, which share their
//! pages (and the slot index its sets) with the live keyspace; a write to a
//! shared page copies it, and the old page then belongs to the snapshot
//! alone until the snapshot is dropped. Redis's snapshot is a forked child,
//! whose copy-on-write pages it never counts against `maxmemory`; the live
//! tables count what they copy here so the node can leave it out too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// One table's count of bytes copied while the latest tracked clone shares
/// its parts. The live table holds the count weakly and the clone strongly,
/// so the count is gone once the clone is dropped, as the copied parts are.
/// Cloning gives an untracked count (a copy for any other purpose counts
/// nothing).
#[derive(Default)]
pub(crate) struct SnapshotCopies {
    count: Weak<AtomicU64>,
    /// A tracked clone's strong hold on its original's count: held for its
    /// drop, never read.
    _owner: Option<Arc<AtomicU64>>,
}

impl Clone for SnapshotCopies {
    fn clone(&self) -> Self {
        SnapshotCopies::default()
    }
}

impl SnapshotCopies {
    /// Starts a new count for a clone about to be made; the clone keeps
    /// what this returns.
    pub(crate) fn track(&mut self) -> SnapshotCopies {
        let count = Arc::new(AtomicU64::new(0));
        self.count = Arc::downgrade(&count);
        SnapshotCopies {
            count: Weak::new(),
            _owner: Some(count),
        }
    }

    /// Bytes counted since the latest tracked clone was made, while it lives.
    pub(crate) fn bytes(&self) -> u64 {
        self.count
            .upgrade()
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// Counts `part` (its size from `bytes`, computed only then) when a clone
    /// still shares it: the write about to copy it leaves it to the clone.
    pub(crate) fn count_if_shared<T: ?Sized>(&self, part: &Arc<T>, bytes: impl FnOnce() -> u64) {
        if Arc::strong_count(part) == 1 {
            return;
        }
        if let Some(count) = self.count.upgrade() {
            count.fetch_add(bytes(), Ordering::Relaxed);
        }
    }
}
