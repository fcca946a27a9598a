//! The large form of hashes and sets: a dense vector of entries plus an open
//! addressing index over it.
//!
//! Everything a client can observe comes from the vector: iteration order,
//! random picks (a uniform index), and scan cursors (positions). The index only
//! makes lookups fast, and its layout is never observable, so the vector's order
//! is all a copy needs to behave identically: DUMP and snapshots write entries
//! in that order and a load rebuilds the same vector.
//!
//! Order follows from history alone: an insert appends, a removal moves the last
//! entry into the hole (`swap_remove`). That gives the scan guarantee Redis
//! makes. A scan walks positions downwards from the top; an entry only ever
//! moves down (into a hole below it), and inserts land above the cursor, so an
//! entry present for the whole scan is below the cursor until it is returned
//! (see [`IndexedTable::scan`]).
//!
//! The index hashes with SipHash-1-3 under a fixed key. Since layout is not
//! observable, the key has no replication meaning; a fixed one keeps values
//! plain data (no seed to carry through DUMP, COPY or snapshots).

/// Entries that are looked up by a byte-string key.
pub trait Keyed {
    fn key(&self) -> &[u8];
}

const INDEX_HASH_KEY: (u64, u64) = (0x6861_7368_7365_7431, 0x696e_6465_7865_6421);

/// Fewest index slots once anything is stored.
const MIN_SLOTS: usize = 8;

/// A slot holds `(tag << 32) | (position + 1)`; 0 is empty. The tag is the high
/// half of the key's hash and also picks the home slot, so moving a slot needs
/// no rehash.
const EMPTY: u64 = 0;

/// Most entries a table holds (positions must fit the slot's low half).
pub const MAX_ENTRIES: usize = u32::MAX as usize - 1;

fn tag_of(key: &[u8]) -> u32 {
    (crate::sip::sip13(INDEX_HASH_KEY.0, INDEX_HASH_KEY.1, key) >> 32) as u32
}

fn slot_tag(slot: u64) -> u32 {
    (slot >> 32) as u32
}

fn slot_position(slot: u64) -> usize {
    (slot as u32 as usize) - 1
}

fn make_slot(tag: u32, position: usize) -> u64 {
    debug_assert!(position < MAX_ENTRIES);
    (u64::from(tag) << 32) | (position as u64 + 1)
}

/// A vector of entries with unique keys and a hash index over it.
#[derive(Clone)]
pub struct IndexedTable<E> {
    entries: Vec<E>,
    slots: Vec<u64>,
}

impl<E: Keyed> Default for IndexedTable<E> {
    fn default() -> Self {
        IndexedTable::new()
    }
}

/// Equal when the entries are equal in order (the index is not state).
impl<E: PartialEq> PartialEq for IndexedTable<E> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<E: Eq> Eq for IndexedTable<E> {}

impl<E: std::fmt::Debug> std::fmt::Debug for IndexedTable<E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(&self.entries).finish()
    }
}

impl<E: Keyed> IndexedTable<E> {
    pub fn new() -> Self {
        IndexedTable {
            entries: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// A table of `entries` in this order; None when two share a key (or there
    /// are too many).
    pub fn from_entries(entries: Vec<E>) -> Option<Self> {
        if entries.len() > MAX_ENTRIES {
            return None;
        }
        let mut table = IndexedTable {
            entries,
            slots: Vec::new(),
        };
        table.rebuild(slot_count_for(table.entries.len()));
        let mut seen = 0;
        for position in 0..table.entries.len() {
            if table.find(table.entries[position].key()) != Some(position) {
                return None;
            }
            seen += 1;
        }
        debug_assert_eq!(seen, table.entries.len());
        Some(table)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn into_entries(self) -> Vec<E> {
        self.entries
    }

    pub fn get(&self, position: usize) -> Option<&E> {
        self.entries.get(position)
    }

    /// The entry at `position`, for changes that keep its key.
    pub fn get_mut(&mut self, position: usize) -> Option<&mut E> {
        self.entries.get_mut(position)
    }

    /// The position of the entry with `key`.
    pub fn find(&self, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let tag = tag_of(key);
        let mask = self.slots.len() - 1;
        let mut index = tag as usize & mask;
        loop {
            let slot = self.slots[index];
            if slot == EMPTY {
                return None;
            }
            if slot_tag(slot) == tag && self.entries[slot_position(slot)].key() == key {
                return Some(slot_position(slot));
            }
            index = (index + 1) & mask;
        }
    }

    /// Where a lookup of `key` starts: its tag and home slot. Reads no
    /// memory of the table but its size (see [`Prefetch`]).
    fn home(&self, key: &[u8]) -> Option<(u32, usize)> {
        if self.slots.is_empty() {
            return None;
        }
        let tag = tag_of(key);
        Some((tag, tag as usize & (self.slots.len() - 1)))
    }

    /// Loads the slot at `index` (the first step of a prefetch).
    fn touch_slot(&self, index: usize) -> u64 {
        self.slots.get(index).copied().unwrap_or(EMPTY)
    }

    /// Loads the entry the slot at `index` names if it carries `tag` (the
    /// second step of a prefetch: the slot is in the cache by then).
    fn touch_entry(&self, tag: u32, index: usize) -> usize {
        match self.slots.get(index) {
            Some(&slot) if slot != EMPTY && slot_tag(slot) == tag => self
                .entries
                .get(slot_position(slot))
                .map_or(0, |entry| entry.key().len()),
            _ => 0,
        }
    }

    /// Appends an entry whose key is absent; false (nothing stored) when the
    /// table is full.
    pub fn push_new(&mut self, entry: E) -> bool {
        debug_assert!(self.find(entry.key()).is_none());
        if self.entries.len() >= MAX_ENTRIES {
            return false;
        }
        if (self.entries.len() + 1) * 2 > self.slots.len() {
            self.rebuild((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let position = self.entries.len();
        let tag = tag_of(entry.key());
        self.entries.push(entry);
        self.place(tag, position);
        true
    }

    /// Removes the entry at `position`; the last entry takes its place.
    pub fn swap_remove(&mut self, position: usize) -> E {
        let tag = tag_of(self.entries[position].key());
        let index = self.slot_of(tag, position);
        self.clear_slot(index);
        let last = self.entries.len() - 1;
        if position != last {
            let moved_tag = tag_of(self.entries[last].key());
            let moved = self.slot_of(moved_tag, last);
            self.slots[moved] = make_slot(moved_tag, position);
        }
        let entry = self.entries.swap_remove(position);
        if self.slots.len() > MIN_SLOTS && self.entries.len() * 8 < self.slots.len() {
            self.rebuild(slot_count_for(self.entries.len()));
        }
        if self.entries.capacity() > 64 && self.entries.capacity() / 4 > self.entries.len() {
            self.entries.shrink_to(self.entries.len() * 2);
        }
        entry
    }

    /// One scan step: the entries at positions `[next, from)`, where `from` is
    /// `cursor` (0 starts at the top, past the last entry) and `next` is `count`
    /// below it. Returns the next cursor, 0 when the scan is complete.
    ///
    /// An entry present for the whole scan is returned at least once: entries
    /// only move down (into holes), inserts land at the top, and every position
    /// below the cursor is still to be visited.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&E)) -> u64 {
        let from = if cursor == 0 {
            self.entries.len()
        } else {
            usize::try_from(cursor)
                .unwrap_or(usize::MAX)
                .min(self.entries.len())
        };
        let next = from.saturating_sub(count.max(1));
        for entry in self.entries[next..from].iter().rev() {
            visit(entry);
        }
        next as u64
    }

    fn place(&mut self, tag: u32, position: usize) {
        let mask = self.slots.len() - 1;
        let mut index = tag as usize & mask;
        while self.slots[index] != EMPTY {
            index = (index + 1) & mask;
        }
        self.slots[index] = make_slot(tag, position);
    }

    /// The index of the slot pointing at `position`.
    fn slot_of(&self, tag: u32, position: usize) -> usize {
        let mask = self.slots.len() - 1;
        let mut index = tag as usize & mask;
        let wanted = make_slot(tag, position);
        while self.slots[index] != wanted {
            debug_assert!(self.slots[index] != EMPTY, "entry missing from the index");
            index = (index + 1) & mask;
        }
        index
    }

    /// Empties a slot, shifting later slots of the same run back so every
    /// entry stays reachable from its home slot (no tombstones).
    fn clear_slot(&mut self, mut hole: usize) {
        let mask = self.slots.len() - 1;
        let mut index = (hole + 1) & mask;
        loop {
            let slot = self.slots[index];
            if slot == EMPTY {
                break;
            }
            let home = slot_tag(slot) as usize & mask;
            // Move it back when the hole lies between its home and where it is.
            if (index.wrapping_sub(home) & mask) >= (index.wrapping_sub(hole) & mask) {
                self.slots[hole] = slot;
                hole = index;
            }
            index = (index + 1) & mask;
        }
        self.slots[hole] = EMPTY;
    }

    fn rebuild(&mut self, slot_count: usize) {
        debug_assert!(slot_count.is_power_of_two() || slot_count == 0);
        self.slots = vec![EMPTY; slot_count];
        if slot_count == 0 {
            return;
        }
        for position in 0..self.entries.len() {
            let tag = tag_of(self.entries[position].key());
            self.place(tag, position);
        }
    }
}

/// Lookups to come in several tables, whose memory is requested together so
/// that the cache misses overlap: a lookup in a large table misses twice in a
/// row (its slot, then the entry the slot names), and a pipeline of lookups
/// would otherwise pay each pair after the other. [`Prefetch::add`] computes
/// each key's home slot; [`Prefetch::run`] loads every slot, then every entry
/// they name. Nothing observable changes.
pub struct Prefetch<'t, E> {
    homes: [(Option<&'t IndexedTable<E>>, u32, usize); PREFETCH_LOOKUPS],
    count: usize,
}

/// Most lookups one [`Prefetch`] holds; more are not prefetched (the memory
/// of the first ones would be out of the cache again by the time they run).
pub const PREFETCH_LOOKUPS: usize = 64;

impl<'t, E: Keyed> Prefetch<'t, E> {
    pub fn new() -> Self {
        Prefetch {
            homes: [(None, 0, 0); PREFETCH_LOOKUPS],
            count: 0,
        }
    }

    /// Notes a lookup of `key` in `table`; false once full.
    pub fn add(&mut self, table: &'t IndexedTable<E>, key: &[u8]) -> bool {
        if self.count == PREFETCH_LOOKUPS {
            return false;
        }
        if let Some((tag, index)) = table.home(key) {
            self.homes[self.count] = (Some(table), tag, index);
            self.count += 1;
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Requests the memory of every lookup noted. The loads of each step are
    /// independent of one another, so the processor keeps them in flight
    /// together.
    pub fn run(&self) {
        let homes = &self.homes[..self.count];
        let mut touched = 0u64;
        for (table, _, index) in homes {
            if let Some(table) = table {
                touched ^= table.touch_slot(*index);
            }
        }
        for (table, tag, index) in homes {
            if let Some(table) = table {
                touched ^= table.touch_entry(*tag, *index) as u64;
            }
        }
        std::hint::black_box(touched);
    }
}

impl<E: Keyed> Default for Prefetch<'_, E> {
    fn default() -> Self {
        Prefetch::new()
    }
}

/// Slots for `len` entries: at most half full, never below the minimum.
fn slot_count_for(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (len * 2).next_power_of_two().max(MIN_SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Item(Vec<u8>);

    impl Keyed for Item {
        fn key(&self) -> &[u8] {
            &self.0
        }
    }

    fn item(index: u32) -> Item {
        Item(format!("member:{index}").into_bytes())
    }

    /// A prefetch's two steps reach the entry of a key that sits in its
    /// home slot (most keys, the index being at most half full), and nothing
    /// for an absent one; the table is unchanged.
    #[test]
    fn a_prefetch_reaches_the_entries_it_looks_up() {
        let mut table = IndexedTable::new();
        for index in 0..1000 {
            assert!(table.push_new(item(index)));
        }
        let copy = table.clone();
        let mut reached = 0;
        for index in 0..1000 {
            let key = item(index).0;
            let (tag, home) = table.home(&key).unwrap();
            table.touch_slot(home);
            let at_home = slot_position(table.slots[home]) == table.find(&key).unwrap();
            let length = table.touch_entry(tag, home);
            if at_home {
                assert_eq!(length, key.len(), "{index}");
                reached += 1;
            }
        }
        assert!(reached > 500, "only {reached} of 1000 keys were at home");
        let (tag, home) = table.home(b"absent").unwrap();
        assert_eq!(table.touch_entry(tag, home), 0);
        let mut prefetch = Prefetch::new();
        for index in 0..(PREFETCH_LOOKUPS as u32 + 10) {
            let key = item(index).0;
            assert_eq!(
                prefetch.add(&table, &key),
                (index as usize) < PREFETCH_LOOKUPS
            );
        }
        prefetch.run();
        assert!(Prefetch::<Item>::new().is_empty());
        assert!(table == copy && table.slots == copy.slots);
    }

    #[test]
    fn insert_find_and_remove_keep_the_index_exact() {
        let mut table = IndexedTable::new();
        for index in 0..2000 {
            assert!(table.push_new(item(index)));
        }
        for index in 0..2000 {
            assert_eq!(table.find(&item(index).0), Some(index as usize));
        }
        assert_eq!(table.find(b"absent"), None);
        // Remove every third entry, by key.
        for index in (0..2000).step_by(3) {
            let position = table.find(&item(index).0).unwrap();
            assert_eq!(table.swap_remove(position), item(index));
        }
        for index in 0..2000 {
            let found = table.find(&item(index).0);
            assert_eq!(found.is_some(), index % 3 != 0, "{index}");
            if let Some(position) = found {
                assert_eq!(table.get(position), Some(&item(index)));
            }
        }
        while !table.is_empty() {
            table.swap_remove(0);
        }
        assert!(table.slots.len() <= MIN_SLOTS);
        assert_eq!(table.find(&item(1).0), None);
    }

    #[test]
    fn removal_moves_the_last_entry_into_the_hole() {
        let mut table = IndexedTable::new();
        for index in 0..5 {
            table.push_new(item(index));
        }
        table.swap_remove(1);
        let keys: Vec<_> = table.entries().to_vec();
        assert_eq!(keys, [item(0), item(4), item(2), item(3)]);
    }

    #[test]
    fn from_entries_refuses_duplicates_and_keeps_order() {
        assert!(IndexedTable::from_entries(vec![item(1), item(2), item(1)]).is_none());
        let table = IndexedTable::from_entries(vec![item(3), item(1), item(2)]).unwrap();
        assert_eq!(table.entries(), [item(3), item(1), item(2)]);
        assert_eq!(table.find(&item(2).0), Some(2));
        let empty = IndexedTable::<Item>::from_entries(Vec::new()).unwrap();
        assert_eq!(empty.find(b"x"), None);
    }

    /// Entries present for a whole scan are returned, whatever is added and
    /// removed between the steps.
    #[test]
    fn scan_survives_changes() {
        let mut table = IndexedTable::new();
        for index in 0..300 {
            table.push_new(item(index));
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = table.scan(cursor, 7, |entry| {
                seen.insert(entry.0.clone());
            });
            round += 1;
            // Churn: remove members 1000+ and low ones added later, add new ones.
            for extra in 0..5 {
                table.push_new(item(1000 + round * 10 + extra));
            }
            if let Some(position) = table.find(&item(1000 + round * 10).0) {
                table.swap_remove(position);
            }
            if round % 3 == 0 {
                let victim = item(200 + round);
                if let Some(position) = table.find(&victim.0) {
                    table.swap_remove(position);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for index in 0..300 {
            let kept_throughout = !(200..300).contains(&index) || (index - 200) % 3 != 0;
            if kept_throughout {
                assert!(seen.contains(&item(index).0), "missed {index}");
            }
        }
        assert!(round > 40);
    }
}
