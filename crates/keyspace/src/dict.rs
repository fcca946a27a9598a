//! The keyspace's hash table: separate chaining over a power-of-two bucket array,
//! hashed with keyed SipHash-1-3 (the key is part of the keyspace's state, so every
//! replica lays keys out identically).
//!
//! It exists, rather than a general-purpose map, for SCAN: the cursor walks bucket
//! indexes in reverse-binary order, which guarantees that a key present for the whole
//! scan is returned at least once even if the table grows or shrinks between calls
//! (a bucket of the old size maps onto a contiguous run of reversed indexes in the
//! new size). It also gives O(1) fair random picks for RANDOMKEY and sampling.

use std::sync::Arc;

use crate::snapshot_copies::SnapshotCopies;

/// Keys up to this long live inside the node: one allocation per key, and a lookup
/// compares bytes already in the cache line it loaded.
const INLINE_KEY_BYTES: usize = 22;

#[derive(Clone)]
enum KeyBytes {
    Inline {
        length: u8,
        data: [u8; INLINE_KEY_BYTES],
    },
    Heap(Box<[u8]>),
}

impl KeyBytes {
    fn new(key: &[u8]) -> KeyBytes {
        if key.len() <= INLINE_KEY_BYTES {
            let mut data = [0u8; INLINE_KEY_BYTES];
            data[..key.len()].copy_from_slice(key);
            KeyBytes::Inline {
                length: key.len() as u8,
                data,
            }
        } else {
            KeyBytes::Heap(key.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { length, data } => &data[..*length as usize],
            KeyBytes::Heap(bytes) => bytes,
        }
    }
}

struct Node<V> {
    key: KeyBytes,
    value: V,
    next: Option<Box<Node<V>>>,
}

/// One bucket's chain. Dropped and cloned iteratively, so a long chain never
/// recurses.
struct Bucket<V>(Option<Box<Node<V>>>);

impl<V: Clone> Clone for Bucket<V> {
    fn clone(&self) -> Self {
        Bucket(clone_chain(&self.0))
    }
}

impl<V> Drop for Bucket<V> {
    fn drop(&mut self) {
        let mut node = self.0.take();
        while let Some(mut current) = node {
            node = current.next.take();
        }
    }
}

/// Buckets per page: the unit that clones share and that a write after a clone
/// copies (see [`Dict`]'s `Clone`).
const PAGE_SHIFT: u32 = 8;
const PAGE_BUCKETS: usize = 1 << PAGE_SHIFT;
const PAGE_MASK: usize = PAGE_BUCKETS - 1;

type Page<V> = Arc<[Bucket<V>]>;

/// Outcome of [`Dict::get_mut_unless`].
pub enum Lookup<'a, V> {
    Found(&'a mut V),
    Removed(V),
    Missing,
}

/// A hash map from byte-string keys to `V` with a resize-proof scan cursor.
///
/// The bucket array is cut into pages of [`PAGE_BUCKETS`] buckets (one page
/// holding the whole array while it is smaller), each behind an `Arc`: a clone
/// shares every page, and the first write to a shared page copies that page
/// alone (its chains, keys and values). That is what lets a snapshot take a
/// consistent copy of the keyspace in time proportional to the page count,
/// while writes go on.
pub struct Dict<V> {
    pages: Vec<Page<V>>,
    bucket_count: usize,
    len: usize,
    hash_key: (u64, u64),
    /// Estimates the bytes of one entry, for [`Dict::snapshot_copy_bytes`];
    /// without it copies are not counted.
    sizer: Option<Sizer<V>>,
    /// What this table copied while the latest tracked clone
    /// ([`Dict::clone_tracked`]) shared it.
    copies: SnapshotCopies,
}

/// The estimated bytes of one entry (key and value).
pub type Sizer<V> = fn(&[u8], &V) -> usize;

/// The estimated bytes of every entry of `page`.
fn page_bytes<V>(page: &[Bucket<V>], sizer: Sizer<V>) -> u64 {
    let mut bytes = size_of_val(page) as u64;
    for bucket in page {
        let mut node = bucket.0.as_deref();
        while let Some(current) = node {
            bytes += (size_of::<Node<V>>() + sizer(current.key.as_slice(), &current.value)) as u64;
            node = current.next.as_deref();
        }
    }
    bytes
}

/// Smallest table allocated once the first key arrives.
const INITIAL_BUCKETS: usize = 4;

/// Empty pages for a table of `bucket_count` buckets (a power of two).
fn empty_pages<V>(bucket_count: usize) -> Vec<Page<V>> {
    let per_page = bucket_count.min(PAGE_BUCKETS);
    let pages = bucket_count / per_page.max(1);
    (0..pages)
        .map(|_| (0..per_page).map(|_| Bucket(None)).collect())
        .collect()
}

/// Hands every node of `page` to `each`: moved out when nothing else shares
/// the page, copied when a clone still does.
fn drain_page<V: Clone>(mut page: Page<V>, mut each: impl FnMut(Box<Node<V>>)) {
    match Arc::get_mut(&mut page) {
        Some(buckets) => {
            for bucket in buckets {
                let mut chain = bucket.0.take();
                while let Some(mut node) = chain {
                    chain = node.next.take();
                    each(node);
                }
            }
        }
        None => {
            for bucket in page.iter() {
                let mut node = bucket.0.as_deref();
                while let Some(current) = node {
                    each(Box::new(Node {
                        key: current.key.clone(),
                        value: current.value.clone(),
                        next: None,
                    }));
                    node = current.next.as_deref();
                }
            }
        }
    }
}

impl<V: Clone> Dict<V> {
    pub fn new(hash_key: (u64, u64)) -> Self {
        Dict {
            pages: Vec::new(),
            bucket_count: 0,
            len: 0,
            hash_key,
            sizer: None,
            copies: SnapshotCopies::default(),
        }
    }

    /// A table that counts what it copies while a tracked clone shares its
    /// pages, each entry estimated by `sizer`.
    pub fn with_sizer(hash_key: (u64, u64), sizer: Sizer<V>) -> Self {
        Dict {
            sizer: Some(sizer),
            ..Dict::new(hash_key)
        }
    }

    /// A clone (as [`Clone`]) whose pages, once this table writes to them
    /// and so copies them, are counted in [`Dict::snapshot_copy_bytes`]
    /// until the clone is dropped: the memory a snapshot holds beyond the
    /// live table, which Redis, whose snapshot is a forked child's, never
    /// counts as its own.
    pub fn clone_tracked(&mut self) -> Self {
        let copies = self.copies.track();
        Dict {
            copies,
            ..self.clone()
        }
    }

    /// Estimated bytes of the pages copied on writes since the latest
    /// tracked clone was made, while that clone lives (0 after).
    pub fn snapshot_copy_bytes(&self) -> u64 {
        self.copies.bytes()
    }

    /// Counts `page` as left to the tracked clone, if one shares it.
    fn count_shared(copies: &SnapshotCopies, sizer: Option<Sizer<V>>, page: &Page<V>) {
        if let Some(sizer) = sizer {
            copies.count_if_shared(page, || page_bytes(page, sizer));
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of buckets (a power of two, or zero while empty).
    pub fn bucket_count(&self) -> usize {
        self.bucket_count
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        crate::sip::sip13(self.hash_key.0, self.hash_key.1, key)
    }

    fn bucket_of(&self, key: &[u8]) -> usize {
        (self.hash(key) as usize) & (self.bucket_count - 1)
    }

    fn head(&self, bucket: usize) -> Option<&Node<V>> {
        self.pages[bucket >> PAGE_SHIFT][bucket & PAGE_MASK]
            .0
            .as_deref()
    }

    /// The chain of `bucket` for writing; copies its page first if a clone
    /// shares it.
    fn link_mut(&mut self, bucket: usize) -> &mut Option<Box<Node<V>>> {
        let page = &mut self.pages[bucket >> PAGE_SHIFT];
        Self::count_shared(&self.copies, self.sizer, page);
        &mut Arc::make_mut(page)[bucket & PAGE_MASK].0
    }

    fn find(&self, bucket: usize, key: &[u8]) -> Option<&Node<V>> {
        let mut node = self.head(bucket);
        while let Some(current) = node {
            if current.key.as_slice() == key {
                return Some(current);
            }
            node = current.next.as_deref();
        }
        None
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        if self.bucket_count == 0 {
            return None;
        }
        self.find(self.bucket_of(key), key).map(|node| &node.value)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        if self.bucket_count == 0 {
            return None;
        }
        let bucket = self.bucket_of(key);
        // Look first, so a miss never copies a shared page.
        self.find(bucket, key)?;
        let mut node = self.link_mut(bucket).as_deref_mut();
        while let Some(current) = node {
            if current.key.as_slice() == key {
                return Some(&mut current.value);
            }
            node = current.next.as_deref_mut();
        }
        None
    }

    /// Looks a key up for writing, unless `remove_if` says its entry is dead, in
    /// which case the entry is removed and returned instead.
    pub fn get_mut_unless(
        &mut self,
        key: &[u8],
        remove_if: impl FnOnce(&V) -> bool,
    ) -> Lookup<'_, V> {
        if self.bucket_count == 0 {
            return Lookup::Missing;
        }
        let bucket = self.bucket_of(key);
        let mut depth = 0;
        let mut verdict = None;
        let mut node = self.head(bucket);
        while let Some(current) = node {
            if current.key.as_slice() == key {
                verdict = Some(remove_if(&current.value));
                break;
            }
            depth += 1;
            node = current.next.as_deref();
        }
        match verdict {
            None => Lookup::Missing,
            Some(true) => match self.remove(key) {
                Some(value) => Lookup::Removed(value),
                None => Lookup::Missing,
            },
            Some(false) => {
                let mut node = self.link_mut(bucket).as_deref_mut();
                for _ in 0..depth {
                    node = node.and_then(|current| current.next.as_deref_mut());
                }
                match node {
                    Some(current) => Lookup::Found(&mut current.value),
                    None => Lookup::Missing,
                }
            }
        }
    }

    /// Loads the buckets and first nodes of `keys` without using them, so a batch of
    /// lookups that follows finds them in cache. The loads are independent, so the
    /// processor overlaps their cache misses instead of paying them one by one.
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        if self.bucket_count == 0 {
            return;
        }
        let mut heads = [None; 128];
        let mut count = 0;
        for key in keys.take(heads.len()) {
            heads[count] = self.head(self.bucket_of(key));
            count += 1;
        }
        let mut touched = 0usize;
        for node in heads[..count].iter().flatten() {
            touched = touched.wrapping_add(node.key.as_slice().len());
        }
        std::hint::black_box(touched);
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        if let Some(slot) = self.get_mut(key) {
            return Some(std::mem::replace(slot, value));
        }
        self.insert_new(key, value);
        None
    }

    /// Inserts a key known to be absent.
    pub fn insert_new(&mut self, key: &[u8], value: V) {
        debug_assert!(!self.contains_key(key));
        if self.len >= self.bucket_count {
            self.resize((self.bucket_count * 2).max(INITIAL_BUCKETS));
        }
        let bucket = self.bucket_of(key);
        let link = self.link_mut(bucket);
        let next = link.take();
        *link = Some(Box::new(Node {
            key: KeyBytes::new(key),
            value,
            next,
        }));
        self.len += 1;
    }

    /// Removes a key, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        if self.bucket_count == 0 {
            return None;
        }
        let bucket = self.bucket_of(key);
        // Look first, so a miss never copies a shared page.
        self.find(bucket, key)?;
        let mut link = self.link_mut(bucket);
        loop {
            match link {
                None => return None,
                Some(node) if node.key.as_slice() == key => {
                    let mut removed = link.take().expect("matched a present node");
                    *link = removed.next.take();
                    self.len -= 1;
                    let removed = *removed;
                    self.shrink_if_sparse();
                    return Some(removed.value);
                }
                Some(node) => link = &mut node.next,
            }
        }
    }

    /// Drops every entry and releases the table (pages a clone still shares
    /// stay with the clone).
    pub fn clear(&mut self) {
        for page in &self.pages {
            Self::count_shared(&self.copies, self.sizer, page);
        }
        self.pages = Vec::new();
        self.bucket_count = 0;
        self.len = 0;
    }

    fn shrink_if_sparse(&mut self) {
        // Like Redis: shrink when under 10% full, never below the initial size.
        if self.bucket_count > INITIAL_BUCKETS && self.len * 10 < self.bucket_count {
            let target = self.len.max(INITIAL_BUCKETS).next_power_of_two();
            self.resize(target);
        }
    }

    fn resize(&mut self, bucket_count: usize) {
        debug_assert!(bucket_count.is_power_of_two());
        let old = std::mem::replace(&mut self.pages, empty_pages(bucket_count));
        self.bucket_count = bucket_count;
        let mask = bucket_count - 1;
        // Old chains in bucket order, each from its head, every node pushed at
        // the head of its new chain.
        for page in old {
            Self::count_shared(&self.copies, self.sizer, &page);
            drain_page(page, |mut node| {
                let bucket = (self.hash(node.key.as_slice()) as usize) & mask;
                let link = self.link_mut(bucket);
                node.next = link.take();
                *link = Some(node);
            });
        }
    }

    /// Visits one bucket per step starting from `cursor` until `visit` has seen at
    /// least `count` entries or `max_buckets` buckets were visited; returns the next
    /// cursor (0 when the scan is complete).
    pub fn scan(
        &self,
        mut cursor: u64,
        count: usize,
        max_buckets: usize,
        mut visit: impl FnMut(&[u8], &V),
    ) -> u64 {
        if self.bucket_count == 0 {
            return 0;
        }
        let mask = (self.bucket_count - 1) as u64;
        let mut seen = 0;
        let mut buckets_visited = 0;
        loop {
            let mut node = self.head((cursor & mask) as usize);
            while let Some(current) = node {
                visit(current.key.as_slice(), &current.value);
                seen += 1;
                node = current.next.as_deref();
            }
            buckets_visited += 1;
            // Increment the reversed cursor: set the bits above the mask, reverse,
            // add one, reverse back.
            cursor |= !mask;
            cursor = cursor.reverse_bits().wrapping_add(1).reverse_bits();
            if cursor == 0 || seen >= count || buckets_visited >= max_buckets {
                return cursor;
            }
        }
    }

    /// A uniformly chosen bucket's chain, then a uniformly chosen entry in it, as
    /// Redis's fair random pick; `random` supplies the randomness.
    pub fn random_entry(&self, mut random: impl FnMut() -> u64) -> Option<(&[u8], &V)> {
        if self.len == 0 {
            return None;
        }
        let mask = self.bucket_count - 1;
        loop {
            let bucket = (random() as usize) & mask;
            let Some(head) = self.head(bucket) else {
                continue;
            };
            let mut length = 0;
            let mut node = Some(head);
            while let Some(current) = node {
                length += 1;
                node = current.next.as_deref();
            }
            let mut chosen = (random() % length as u64) as usize;
            let mut node = head;
            while chosen > 0 {
                node = node.next.as_deref().expect("index within chain length");
                chosen -= 1;
            }
            return Some((node.key.as_slice(), &node.value));
        }
    }

    /// The SipHash key the table hashes with.
    pub fn hash_key(&self) -> (u64, u64) {
        self.hash_key
    }

    /// Appends a key known to be absent at the tail of its chain, growing the table
    /// as [`Dict::insert_new`] would but keeping every chain in arrival order.
    ///
    /// Used to rebuild a table from another's iteration order: once the entries
    /// are all in, [`Dict::restore_bucket_count`] with the original's bucket count
    /// gives the original's exact layout (same buckets, same chain order).
    pub(crate) fn push_back_new(&mut self, key: &[u8], value: V) {
        debug_assert!(!self.contains_key(key));
        if self.len >= self.bucket_count {
            self.resize_in_order((self.bucket_count * 2).max(INITIAL_BUCKETS));
        }
        let bucket = self.bucket_of(key);
        self.append(
            bucket,
            Box::new(Node {
                key: KeyBytes::new(key),
                value,
                next: None,
            }),
        );
        self.len += 1;
    }

    /// Sets the bucket count of a table filled by [`Dict::push_back_new`] to
    /// `bucket_count`, keeping chains in arrival order. Refuses counts no table
    /// holding `len()` keys can have: zero unless empty, not a power of two, below
    /// the initial size or the key count, or far above what shrinking allows.
    pub(crate) fn restore_bucket_count(&mut self, bucket_count: u64) -> Result<(), String> {
        let len = self.len as u64;
        let largest = (INITIAL_BUCKETS as u64).max(len.saturating_mul(16));
        let valid = if bucket_count == 0 {
            len == 0
        } else {
            bucket_count.is_power_of_two()
                && bucket_count >= INITIAL_BUCKETS as u64
                && bucket_count >= len
                && bucket_count <= largest
        };
        let bucket_count = match usize::try_from(bucket_count) {
            Ok(count) if valid => count,
            _ => return Err(format!("bucket count {bucket_count} for {len} keys")),
        };
        if bucket_count == 0 {
            self.pages = Vec::new();
            self.bucket_count = 0;
        } else if bucket_count != self.bucket_count {
            self.resize_in_order(bucket_count);
        }
        Ok(())
    }

    /// Rehashes into `bucket_count` buckets, appending each node at the tail of its
    /// new chain in old table order (so chains keep their relative order).
    fn resize_in_order(&mut self, bucket_count: usize) {
        debug_assert!(bucket_count.is_power_of_two());
        let old = std::mem::replace(&mut self.pages, empty_pages(bucket_count));
        self.bucket_count = bucket_count;
        for page in old {
            Self::count_shared(&self.copies, self.sizer, &page);
            drain_page(page, |node| {
                let bucket = self.bucket_of(node.key.as_slice());
                self.append(bucket, node);
            });
        }
    }

    /// Links `node` (whose `next` is empty) at the tail of `bucket`'s chain.
    fn append(&mut self, bucket: usize, node: Box<Node<V>>) {
        let mut link = self.link_mut(bucket);
        while let Some(current) = link {
            link = &mut current.next;
        }
        *link = Some(node);
    }

    /// Every entry, in bucket order (deterministic for a given hash key and history).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.pages
            .iter()
            .flat_map(|page| page.iter())
            .flat_map(|bucket| {
                let mut node = bucket.0.as_deref();
                std::iter::from_fn(move || {
                    let current = node?;
                    node = current.next.as_deref();
                    Some((current.key.as_slice(), &current.value))
                })
            })
    }
}

/// Copies the table exactly: same hash key, bucket count and chain order, so the
/// copy scans, picks and resizes as the original would. The copy shares every
/// page with the original; whichever of the two writes to a page first copies
/// that page, so a clone costs one reference per page, not a copy of the data.
impl<V: Clone> Clone for Dict<V> {
    fn clone(&self) -> Self {
        Dict {
            pages: self.pages.clone(),
            bucket_count: self.bucket_count,
            len: self.len,
            hash_key: self.hash_key,
            sizer: self.sizer,
            copies: SnapshotCopies::default(),
        }
    }
}

/// A copy of one chain, in order, built iteratively (no recursion on long chains).
fn clone_chain<V: Clone>(head: &Option<Box<Node<V>>>) -> Option<Box<Node<V>>> {
    let mut copy = None;
    let mut tail = &mut copy;
    let mut node = head.as_deref();
    while let Some(current) = node {
        let appended = tail.insert(Box::new(Node {
            key: current.key.clone(),
            value: current.value.clone(),
            next: None,
        }));
        tail = &mut appended.next;
        node = current.next.as_deref();
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn key(index: u32) -> Vec<u8> {
        format!("key:{index}").into_bytes()
    }

    /// Every entry of this test's tables counts 100 bytes.
    fn hundred(_: &[u8], _: &u32) -> usize {
        100
    }

    fn sized(count: u32) -> Dict<u32> {
        let mut dict = Dict::with_sizer((7, 8), hundred);
        for index in 0..count {
            dict.insert(&key(index), index);
        }
        dict
    }

    #[test]
    fn pages_copied_while_a_tracked_clone_shares_them_are_counted_until_it_goes() {
        let mut dict = sized(4000);
        assert!(dict.bucket_count() >= 4096, "many pages");
        let entry = (100 + size_of::<Node<u32>>()) as u64;
        let whole_page = |dict: &Dict<u32>, bucket: usize| -> u64 {
            let page = &dict.pages[bucket >> PAGE_SHIFT];
            page_bytes(page, hundred)
        };

        // An untracked clone (a copy for any other purpose) counts nothing.
        let plain = dict.clone();
        *dict.get_mut(&key(1)).unwrap() = 10;
        assert_eq!(dict.snapshot_copy_bytes(), 0);
        drop(plain);

        let snapshot = dict.clone_tracked();
        assert_eq!(dict.snapshot_copy_bytes(), 0, "nothing copied yet");
        // The first write to a page copies it: the whole page is counted,
        // once; a second write to the same page counts nothing more.
        let bucket = dict.bucket_of(&key(2));
        let expected = whole_page(&dict, bucket);
        assert!(expected >= entry, "the page holds key 2");
        *dict.get_mut(&key(2)).unwrap() = 20;
        assert_eq!(dict.snapshot_copy_bytes(), expected);
        *dict.get_mut(&key(2)).unwrap() = 21;
        assert_eq!(dict.snapshot_copy_bytes(), expected);
        // Writing every key copies every page: about the whole table.
        for index in 0..4000 {
            *dict.get_mut(&key(index)).unwrap() += 1;
        }
        let all = dict.snapshot_copy_bytes();
        let table = 4000 * entry + (dict.bucket_count() * size_of::<Bucket<u32>>()) as u64;
        assert_eq!(all, table);
        // The snapshot is written and dropped: what it held is freed.
        drop(snapshot);
        assert_eq!(dict.snapshot_copy_bytes(), 0);
        *dict.get_mut(&key(3)).unwrap() = 30;
        assert_eq!(dict.snapshot_copy_bytes(), 0);
    }

    #[test]
    fn a_resize_or_a_clear_under_a_tracked_clone_counts_the_pages_left_to_it() {
        let entry = (100 + size_of::<Node<u32>>()) as u64;
        // Growing past the load factor rehashes into new pages: the old ones
        // all stay with the clone.
        let mut dict = sized(4096);
        let buckets = dict.bucket_count();
        let snapshot = dict.clone_tracked();
        for index in 4096..5000 {
            dict.insert(&key(index), index);
        }
        assert!(dict.bucket_count() > buckets, "the table grew");
        assert!(dict.snapshot_copy_bytes() >= 4096 * entry);
        drop(snapshot);
        assert_eq!(dict.snapshot_copy_bytes(), 0);

        let mut dict = sized(1000);
        let snapshot = dict.clone_tracked();
        dict.clear();
        assert_eq!(
            dict.snapshot_copy_bytes(),
            1000 * entry + (snapshot.bucket_count() * size_of::<Bucket<u32>>()) as u64
        );
        assert_eq!(snapshot.len(), 1000);
    }

    #[test]
    fn insert_get_remove() {
        let mut dict = Dict::new((1, 2));
        for index in 0..1000 {
            assert_eq!(dict.insert(&key(index), index), None);
        }
        assert_eq!(dict.len(), 1000);
        assert_eq!(dict.insert(&key(7), 70), Some(7));
        assert_eq!(dict.get(&key(7)), Some(&70));
        for index in 0..1000 {
            assert!(dict.remove(&key(index)).is_some());
        }
        assert!(dict.is_empty());
        assert!(dict.bucket_count() <= INITIAL_BUCKETS);
    }

    /// Every key present for the whole scan is returned, even when the table grows
    /// and shrinks between calls.
    #[test]
    fn scan_survives_resizes() {
        let mut dict = Dict::new((3, 4));
        for index in 0..500 {
            dict.insert(&key(index), ());
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut round = 0u32;
        loop {
            cursor = dict.scan(cursor, 10, 100, |found, _| {
                seen.insert(found.to_vec());
            });
            round += 1;
            // Grow hard, then shrink back below the original, while scanning.
            if round == 5 {
                for index in 1000..5000 {
                    dict.insert(&key(index), ());
                }
            }
            if round == 20 {
                for index in 1000..5000 {
                    dict.remove(&key(index));
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for index in 0..500 {
            assert!(seen.contains(&key(index)), "missed {index}");
        }
    }

    fn contents(dict: &Dict<u32>) -> Vec<(Vec<u8>, u32)> {
        dict.iter()
            .map(|(key, value)| (key.to_vec(), *value))
            .collect()
    }

    /// A clone shares pages with the original; writes to either, including
    /// resizes both ways, never show through to the other, and each keeps the
    /// exact layout (iteration order) of a table with its own history.
    #[test]
    fn clones_share_pages_until_written() {
        let mut original = Dict::new((7, 8));
        for index in 0..3000 {
            original.insert(&key(index), index);
        }
        let mut twin = Dict::new((7, 8));
        for index in 0..3000 {
            twin.insert(&key(index), index);
        }
        let copy = original.clone();
        let frozen = contents(&copy);
        assert_eq!(frozen, contents(&original));
        // Writes in place, inserts that grow the table, removals that shrink it.
        for dict in [&mut original, &mut twin] {
            *dict.get_mut(&key(5)).unwrap() = 500;
            assert!(dict.get_mut(&key(99_999)).is_none());
            for index in 3000..9000 {
                dict.insert(&key(index), index);
            }
            for index in 0..8990 {
                if index != 5 {
                    dict.remove(&key(index));
                }
            }
        }
        assert_eq!(contents(&copy), frozen, "the clone never changed");
        assert_eq!(copy.bucket_count(), 4096);
        assert_eq!(
            contents(&original),
            contents(&twin),
            "same layout as unshared"
        );
        assert_eq!(original.bucket_count(), twin.bucket_count());
        // And the other way round: the clone's writes leave the original alone.
        let before = contents(&original);
        let mut copy = copy;
        copy.clear();
        copy.insert(&key(1), 1);
        assert_eq!(contents(&original), before);
        let mut second = original.clone();
        assert_eq!(second.remove(&key(5)), Some(500));
        assert_eq!(original.get(&key(5)), Some(&500));
    }

    #[test]
    fn random_entry_finds_members() {
        let mut dict = Dict::new((5, 6));
        let mut state = 1u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        assert!(dict.random_entry(&mut next).is_none());
        for index in 0..10 {
            dict.insert(&key(index), index);
        }
        let mut hits = BTreeSet::new();
        for _ in 0..500 {
            let (_, value) = dict.random_entry(&mut next).unwrap();
            hits.insert(*value);
        }
        assert_eq!(hits.len(), 10);
    }
}
