//! The sorted set value: members with scores, ordered by score and then by the
//! member's bytes.
//!
//! Redis 7.2 keeps a small sorted set in one listpack and a larger one as a
//! skiplist plus a hash table, and OBJECT ENCODING shows which. This type does
//! the same with its own structures:
//!
//! - `listpack`: a sorted vector of entries. Every operation is linear at worst,
//!   and the vector holds at most [`LISTPACK_MAX_ENTRIES`] entries whose members
//!   are at most [`LISTPACK_MAX_VALUE_BYTES`] long, as Redis's listpack does.
//! - `skiplist`: an order-statistic tree ([`RankTree`], a B+tree whose inner
//!   nodes know their children's entry counts: O(log N) insert, delete, rank
//!   and select, and O(log N + M) removal of M consecutive ranks) plus a
//!   member index, the keyspace's own hash table ([`Dict`]) under a fixed key
//!   (O(1) score lookups and removals, and ZSCAN's reverse-binary cursor, which
//!   survives any change and reads the same on every replica).
//!
//! A set becomes a skiplist when an addition would take it past either limit,
//! and never goes back, as in Redis. Short members (up to 22 bytes) are stored
//! inline in both forms, without an allocation of their own.
//!
//! Nothing here depends on where values sit in memory or on global randomness:
//! iteration order is the score order, the index's buckets are a fixed
//! function of the members, and random picks draw from the caller's [`Rng`].

use crate::dict::Dict;
use crate::list::ListElement;
pub use crate::rank_tree::{RankTree, TreeIter};
use crate::rng::Rng;
use std::cmp::Ordering;

/// `zset-max-listpack-entries`: most entries a listpack-encoded set holds.
pub const LISTPACK_MAX_ENTRIES: usize = 128;

/// `zset-max-listpack-value`: longest member a listpack-encoded set holds.
pub const LISTPACK_MAX_VALUE_BYTES: usize = 64;

/// Fixed keys for the member index's hash: the index's buckets (and so
/// ZSCAN's order) must be the same on every replica and after every reload.
const INDEX_HASH_KEYS: (u64, u64) = (0x7a73_6574_2d69_6e64, 0x6578_2d6f_7264_6572);

/// One member and its score. Scores are never NaN.
#[derive(Clone, PartialEq)]
pub struct Entry {
    pub score: f64,
    member: ListElement,
}

impl Entry {
    pub fn new(score: f64, member: &[u8]) -> Entry {
        Entry {
            score,
            member: ListElement::new(member),
        }
    }

    pub fn member(&self) -> &[u8] {
        self.member.as_bytes()
    }

    /// The member, handing over a long member's allocation.
    pub fn into_member(self) -> bytes::Bytes {
        self.member.into_bytes()
    }

    /// Order against another (score, member) position.
    pub fn cmp_to(&self, score: f64, member: &[u8]) -> Ordering {
        compare(self.score, self.member(), score, member)
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "({}, {:?})",
            self.score,
            String::from_utf8_lossy(self.member())
        )
    }
}

/// The sorted set order: by score (with -0 equal to 0, as Redis compares
/// doubles), then bytewise by member (`memcmp`, then the shorter first).
pub fn compare(score: f64, member: &[u8], other_score: f64, other_member: &[u8]) -> Ordering {
    score
        .partial_cmp(&other_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| member.cmp(other_member))
}

/// What adding a member did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Updated,
    Unchanged,
}

/// A sorted set value. Never empty while stored: commands delete a set when its
/// last member goes.
#[derive(Clone, PartialEq)]
pub struct ZSetValue {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// Sorted by (score, member).
    Listpack(Vec<Entry>),
    Skiplist(Box<Indexed>),
}

impl PartialEq for Repr {
    /// Same encoding and the same entries in the same order.
    fn eq(&self, other: &Repr) -> bool {
        match (self, other) {
            (Repr::Listpack(first), Repr::Listpack(second)) => first == second,
            (Repr::Skiplist(first), Repr::Skiplist(second)) => {
                first.tree.len() == second.tree.len()
                    && first
                        .tree
                        .iter_from(0, false)
                        .eq(second.tree.iter_from(0, false))
            }
            _ => false,
        }
    }
}

impl std::fmt::Debug for ZSetValue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ZSetValue")
            .field("encoding", &self.encoding_name())
            .field("entries", &self.iter().collect::<Vec<_>>())
            .finish()
    }
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue::new()
    }
}

impl ZSetValue {
    /// An empty set, encoded as a listpack.
    pub fn new() -> ZSetValue {
        ZSetValue {
            repr: Repr::Listpack(Vec::new()),
        }
    }

    /// An empty set for `size_hint` additions whose first member is
    /// `member_bytes` long (Redis's `zsetTypeCreate`): a skiplist from the start
    /// when either is beyond the listpack limits.
    pub fn with_hint(size_hint: usize, member_bytes: usize) -> ZSetValue {
        let mut set = ZSetValue::new();
        if size_hint > LISTPACK_MAX_ENTRIES || member_bytes > LISTPACK_MAX_VALUE_BYTES {
            set.convert_to_skiplist();
        }
        set
    }

    /// A set of these entries in any order, encoded as Redis encodes a set it
    /// loads: a listpack when it fits one. `None` when a member repeats or a
    /// score is NaN.
    pub fn from_entries(mut entries: Vec<Entry>) -> Option<ZSetValue> {
        if entries.iter().any(|entry| entry.score.is_nan()) {
            return None;
        }
        entries.sort_by(|first, second| first.cmp_to(second.score, second.member()));
        let mut index = Dict::new(INDEX_HASH_KEYS);
        for entry in &entries {
            if index.insert(entry.member(), entry.score).is_some() {
                return None;
            }
        }
        let fits = entries.len() <= LISTPACK_MAX_ENTRIES
            && entries
                .iter()
                .all(|entry| entry.member().len() <= LISTPACK_MAX_VALUE_BYTES);
        let repr = if fits {
            Repr::Listpack(entries)
        } else {
            Repr::Skiplist(Box::new(Indexed {
                tree: RankTree::from_sorted(entries),
                index,
            }))
        };
        Some(ZSetValue { repr })
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(entries) => entries.len(),
            Repr::Skiplist(indexed) => indexed.tree.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding_name(&self) -> &'static str {
        if self.is_skiplist() {
            "skiplist"
        } else {
            "listpack"
        }
    }

    pub fn is_skiplist(&self) -> bool {
        matches!(self.repr, Repr::Skiplist(_))
    }

    /// Turns a listpack into a skiplist (the one-way conversion).
    pub fn convert_to_skiplist(&mut self) {
        let Repr::Listpack(entries) = &mut self.repr else {
            return;
        };
        let entries = std::mem::take(entries);
        let mut index = Dict::new(INDEX_HASH_KEYS);
        for entry in &entries {
            index.insert_new(entry.member(), entry.score);
        }
        self.repr = Repr::Skiplist(Box::new(Indexed {
            tree: RankTree::from_sorted(entries),
            index,
        }));
    }

    /// Redis's `zsetTypeMaybeConvert`: a listpack about to receive more than
    /// the entry limit in one command becomes a skiplist first.
    pub fn maybe_convert(&mut self, size_hint: usize) {
        if size_hint > LISTPACK_MAX_ENTRIES {
            self.convert_to_skiplist();
        }
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Listpack(entries) => entries
                .iter()
                .find(|entry| entry.member() == member)
                .map(|entry| entry.score),
            Repr::Skiplist(indexed) => indexed.score(member),
        }
    }

    /// Gives `member` the score `score` (not NaN), adding it when absent.
    pub fn set(&mut self, member: &[u8], score: f64) -> Change {
        match self.set_with(member, |_| Ok::<_, ()>(Some(score))) {
            Ok(change) => change,
            Err(()) => Change::Unchanged,
        }
    }

    /// Gives `member` the score `decide` returns when shown its current one
    /// (`None` when absent; never NaN): `Ok(None)` leaves the set as it is,
    /// an error is handed back. The member is looked up once.
    pub fn set_with<E>(
        &mut self,
        member: &[u8],
        decide: impl FnOnce(Option<f64>) -> Result<Option<f64>, E>,
    ) -> Result<Change, E> {
        if let Repr::Skiplist(indexed) = &mut self.repr {
            let Some(stored) = indexed.index.get_mut(member) else {
                let Some(score) = decide(None)? else {
                    return Ok(Change::Unchanged);
                };
                debug_assert!(!score.is_nan());
                indexed.index.insert_new(member, score);
                indexed.tree.insert(Entry::new(score, member));
                return Ok(Change::Added);
            };
            let current = *stored;
            let Some(score) = decide(Some(current))? else {
                return Ok(Change::Unchanged);
            };
            debug_assert!(!score.is_nan());
            // Equal scores (0 and -0 included) change nothing, as in Redis.
            if current == score {
                return Ok(Change::Unchanged);
            }
            // The entry (and its member's allocation) moves to its new place
            // in one descent each way.
            *stored = score;
            let mut entry = indexed
                .tree
                .remove_key(current, member)
                .unwrap_or_else(|| Entry::new(score, member));
            entry.score = score;
            indexed.tree.insert(entry);
            return Ok(Change::Updated);
        }
        let current = self.score(member);
        let Some(score) = decide(current)? else {
            return Ok(Change::Unchanged);
        };
        debug_assert!(!score.is_nan());
        let Some(current) = current else {
            self.insert_new(member, score);
            return Ok(Change::Added);
        };
        if current == score {
            return Ok(Change::Unchanged);
        }
        self.remove(member);
        self.insert_new(member, score);
        Ok(Change::Updated)
    }

    /// Adds a member known to be absent, converting first when the listpack
    /// would outgrow its limits.
    fn insert_new(&mut self, member: &[u8], score: f64) {
        if let Repr::Listpack(entries) = &self.repr {
            if entries.len() + 1 > LISTPACK_MAX_ENTRIES || member.len() > LISTPACK_MAX_VALUE_BYTES {
                self.convert_to_skiplist();
            }
        }
        match &mut self.repr {
            Repr::Listpack(entries) => {
                let position =
                    entries.partition_point(|entry| entry.cmp_to(score, member) == Ordering::Less);
                entries.insert(position, Entry::new(score, member));
            }
            Repr::Skiplist(indexed) => {
                indexed.index.insert_new(member, score);
                indexed.tree.insert(Entry::new(score, member));
            }
        }
    }

    /// Removes `member`; its score when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Listpack(entries) => {
                let position = entries.iter().position(|entry| entry.member() == member)?;
                Some(entries.remove(position).score)
            }
            Repr::Skiplist(indexed) => {
                let score = indexed.index.remove(member)?;
                indexed.tree.remove_key(score, member);
                Some(score)
            }
        }
    }

    /// The 0-based rank of `member` in ascending order, with its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Listpack(entries) => entries
                .iter()
                .position(|entry| entry.member() == member)
                .map(|rank| (rank, entries[rank].score)),
            Repr::Skiplist(indexed) => {
                let score = indexed.score(member)?;
                Some((indexed.tree.rank_of(score, member), score))
            }
        }
    }

    /// The entry at ascending rank `rank`.
    pub fn get(&self, rank: usize) -> Option<&Entry> {
        match &self.repr {
            Repr::Listpack(entries) => entries.get(rank),
            Repr::Skiplist(indexed) => indexed.tree.get(rank),
        }
    }

    /// How many entries come first in ascending order and satisfy `before`;
    /// `before` must hold for a prefix of the set (true, then only false).
    pub fn partition_point(&self, before: impl Fn(&Entry) -> bool) -> usize {
        match &self.repr {
            Repr::Listpack(entries) => entries.partition_point(before),
            Repr::Skiplist(indexed) => indexed.tree.partition_point(before),
        }
    }

    /// [`ZSetValue::partition_point`] for a `before` that may not hold for a
    /// prefix (a lex range over members of different scores, which Redis
    /// leaves undefined): a binary search over ranks, so the answer depends
    /// only on the entries in order, never on how the set is stored. A
    /// replica that rebuilt the set from a snapshot (another tree shape) or
    /// holds it in the other encoding answers, and removes, the same.
    /// O(log² N) for a skiplist.
    pub fn partition_point_by_rank(&self, before: impl Fn(&Entry) -> bool) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = low + (high - low) / 2;
            match self.get(middle) {
                Some(entry) if before(entry) => low = middle + 1,
                _ => high = middle,
            }
        }
        low
    }

    /// Entries from ascending rank `rank` on: upwards, or downwards when
    /// `reverse` (from `rank` to rank 0).
    pub fn iter_from(&self, rank: usize, reverse: bool) -> impl Iterator<Item = &Entry> + '_ {
        let iter: Box<dyn Iterator<Item = &Entry> + '_> = match &self.repr {
            Repr::Listpack(entries) if reverse => {
                let end = rank.saturating_add(1).min(entries.len());
                Box::new(entries[..end].iter().rev())
            }
            Repr::Listpack(entries) => Box::new(entries.get(rank..).unwrap_or_default().iter()),
            Repr::Skiplist(indexed) => Box::new(indexed.tree.iter_from(rank, reverse)),
        };
        iter
    }

    /// Every entry in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.iter_from(0, false)
    }

    /// Removes the entries of ascending ranks `first..end`; how many went.
    pub fn remove_ranks(&mut self, first: usize, end: usize) -> usize {
        let end = end.min(self.len());
        if first >= end {
            return 0;
        }
        match &mut self.repr {
            Repr::Listpack(entries) => {
                entries.drain(first..end);
            }
            Repr::Skiplist(indexed) => {
                for entry in indexed.tree.remove_range(first, end) {
                    indexed.index.remove(entry.member());
                }
            }
        }
        end - first
    }

    /// Removes and returns the lowest entry, or the highest when `highest`.
    pub fn pop(&mut self, highest: bool) -> Option<Entry> {
        let length = self.len();
        if length == 0 {
            return None;
        }
        let rank = if highest { length - 1 } else { 0 };
        match &mut self.repr {
            Repr::Listpack(entries) => Some(entries.remove(rank)),
            Repr::Skiplist(indexed) => {
                let entry = indexed.tree.remove_at(rank)?;
                indexed.index.remove(entry.member());
                Some(entry)
            }
        }
    }

    /// A uniformly random entry, drawn from `rng`.
    pub fn random(&self, rng: &mut Rng) -> Option<&Entry> {
        if self.is_empty() {
            return None;
        }
        self.get(rng.below(self.len() as u64) as usize)
    }

    /// One ZSCAN step over a skiplist-encoded set: visits the members of the
    /// index's buckets from `cursor` on (reverse-binary order, whole buckets)
    /// until about `count` were seen, and returns the next cursor, 0 when
    /// done. A member present for the whole scan is visited at least once
    /// whatever changes between steps. A listpack-encoded set is visited whole.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&[u8], f64)) -> u64 {
        let Repr::Skiplist(indexed) = &self.repr else {
            for entry in self.iter() {
                visit(entry.member(), entry.score);
            }
            return 0;
        };
        let count = count.max(1);
        indexed
            .index
            .scan(cursor, count, count.saturating_mul(10), |member, score| {
                visit(member, *score)
            })
    }

    /// Checks the representation's invariants (tests).
    #[doc(hidden)]
    pub fn check(&self) -> Result<(), String> {
        let entries: Vec<&Entry> = self.iter().collect();
        for pair in entries.windows(2) {
            if pair[0].cmp_to(pair[1].score, pair[1].member()) != Ordering::Less {
                return Err(format!("out of order: {:?} {:?}", pair[0], pair[1]));
            }
        }
        match &self.repr {
            Repr::Listpack(entries) => {
                if entries.len() > LISTPACK_MAX_ENTRIES
                    || entries
                        .iter()
                        .any(|entry| entry.member().len() > LISTPACK_MAX_VALUE_BYTES)
                {
                    return Err("listpack past its limits".into());
                }
            }
            Repr::Skiplist(indexed) => {
                indexed.tree.check()?;
                if indexed.index.len() != indexed.tree.len() {
                    return Err("index and tree sizes differ".into());
                }
                for entry in &entries {
                    if indexed.score(entry.member()).map(f64::to_bits)
                        != Some(entry.score.to_bits())
                    {
                        return Err(format!("index disagrees on {entry:?}"));
                    }
                }
            }
        }
        Ok(())
    }
}

impl ZSetValue {
    /// The member index of the skiplist form (none for a listpack), for a
    /// prefetch of the lookups to come.
    pub fn member_index(&self) -> Option<&Dict<f64>> {
        match &self.repr {
            Repr::Skiplist(indexed) => Some(&indexed.index),
            _ => None,
        }
    }
}

/// A skiplist-encoded set's structures.
#[derive(Clone)]
struct Indexed {
    tree: RankTree,
    index: Dict<f64>,
}

impl Indexed {
    fn score(&self, member: &[u8]) -> Option<f64> {
        self.index.get(member).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn members(set: &ZSetValue) -> Vec<String> {
        set.iter()
            .map(|entry| String::from_utf8_lossy(entry.member()).into_owned())
            .collect()
    }

    #[test]
    fn orders_by_score_then_bytes() {
        let mut set = ZSetValue::new();
        assert_eq!(set.set(b"b", 1.0), Change::Added);
        assert_eq!(set.set(b"a", 1.0), Change::Added);
        assert_eq!(set.set(b"c", 0.5), Change::Added);
        assert_eq!(set.set(b"ab", 1.0), Change::Added);
        assert_eq!(set.set(b"\xff", f64::NEG_INFINITY), Change::Added);
        assert_eq!(members(&set), ["\u{fffd}", "c", "a", "ab", "b"]);
        assert_eq!(set.set(b"c", 0.5), Change::Unchanged);
        assert_eq!(set.set(b"c", 2.0), Change::Updated);
        assert_eq!(set.rank(b"c"), Some((4, 2.0)));
        assert_eq!(set.remove(b"a"), Some(1.0));
        assert_eq!(set.remove(b"a"), None);
        assert_eq!(set.len(), 4);
        assert_eq!(set.encoding_name(), "listpack");
        set.check().unwrap();
    }

    #[test]
    fn converts_one_way_at_the_limits() {
        let mut set = ZSetValue::new();
        for index in 0..LISTPACK_MAX_ENTRIES {
            set.set(format!("m{index}").as_bytes(), index as f64);
        }
        assert_eq!(set.encoding_name(), "listpack");
        set.set(b"one more", 0.0);
        assert_eq!(set.encoding_name(), "skiplist");
        while set.len() > 1 {
            set.pop(false);
        }
        assert_eq!(set.encoding_name(), "skiplist");
        let mut long = ZSetValue::new();
        long.set(&[b'x'; LISTPACK_MAX_VALUE_BYTES], 1.0);
        assert_eq!(long.encoding_name(), "listpack");
        long.set(&[b'y'; LISTPACK_MAX_VALUE_BYTES + 1], 1.0);
        assert_eq!(long.encoding_name(), "skiplist");
        // Updating an existing member never converts.
        let mut small = ZSetValue::new();
        small.set(b"a", 1.0);
        small.set(b"a", 2.0);
        assert_eq!(small.encoding_name(), "listpack");
        assert_eq!(ZSetValue::with_hint(129, 1).encoding_name(), "skiplist");
        assert_eq!(ZSetValue::with_hint(128, 65).encoding_name(), "skiplist");
        assert_eq!(ZSetValue::with_hint(128, 64).encoding_name(), "listpack");
    }

    #[test]
    fn loading_picks_the_natural_encoding_and_refuses_duplicates() {
        let entries = |count: usize| {
            (0..count)
                .map(|index| Entry::new(-(index as f64), format!("m{index}").as_bytes()))
                .collect::<Vec<_>>()
        };
        let small = ZSetValue::from_entries(entries(128)).unwrap();
        assert_eq!(small.encoding_name(), "listpack");
        let large = ZSetValue::from_entries(entries(129)).unwrap();
        assert_eq!(large.encoding_name(), "skiplist");
        large.check().unwrap();
        assert_eq!(large.get(0).unwrap().member(), b"m128");
        let duplicated = vec![Entry::new(1.0, b"a"), Entry::new(2.0, b"a")];
        assert!(ZSetValue::from_entries(duplicated).is_none());
        assert!(ZSetValue::from_entries(vec![Entry::new(f64::NAN, b"a")]).is_none());
    }

    /// Range removal: prefixes, suffixes, middles and the whole set, of
    /// every size, leave a balanced tree holding exactly the rest, and hand
    /// back the removed entries in order.
    #[test]
    fn removing_rank_ranges_keeps_the_tree_balanced_and_exact() {
        let mut rng = Rng::new(7);
        for length in [1usize, 2, 3, 10, 129, 500, 2000] {
            for _ in 0..20 {
                let entries: Vec<Entry> = (0..length)
                    .map(|index| Entry::new(index as f64, format!("m{index:05}").as_bytes()))
                    .collect();
                let mut set = ZSetValue::from_entries(entries.clone()).unwrap();
                set.convert_to_skiplist();
                let first = rng.below(length as u64 + 1) as usize;
                let end = first + rng.below((length - first) as u64 + 2) as usize;
                let removed = set.remove_ranks(first, end);
                let end = end.min(length);
                assert_eq!(removed, end.saturating_sub(first));
                set.check().unwrap();
                let expected: Vec<&Entry> = entries[..first]
                    .iter()
                    .chain(&entries[end.max(first)..])
                    .collect();
                assert_eq!(set.iter().collect::<Vec<_>>(), expected);
                for entry in &entries[first..end.max(first)] {
                    assert_eq!(set.score(entry.member()), None);
                }
            }
        }
        let mut tree = RankTree::from_sorted(
            (0..100)
                .map(|index| Entry::new(index as f64, b"x"))
                .collect(),
        );
        let taken = tree.remove_range(10, 20);
        assert_eq!(
            taken.iter().map(|entry| entry.score).collect::<Vec<_>>(),
            (10..20).map(f64::from).collect::<Vec<_>>()
        );
        tree.check().unwrap();
        assert_eq!(tree.len(), 90);
    }

    /// A small deterministic generator for the structure tests.
    fn random_set(seed: u64, operations: usize) -> (ZSetValue, BTreeMap<Vec<u8>, f64>) {
        let mut rng = Rng::new(seed);
        let mut set = ZSetValue::new();
        set.convert_to_skiplist();
        let mut model = BTreeMap::new();
        for _ in 0..operations {
            let member = format!("m{}", rng.below(300)).into_bytes();
            match rng.below(10) {
                0..=5 => {
                    let score = rng.below(50) as f64 / 2.0;
                    set.set(&member, score);
                    model.insert(member, score);
                }
                6 | 7 => {
                    assert_eq!(set.remove(&member), model.remove(&member));
                }
                8 => {
                    if let Some(entry) = set.pop(rng.below(2) == 0) {
                        model.remove(entry.member());
                    }
                }
                _ => {
                    let length = set.len();
                    let first = rng.below(length as u64 + 1) as usize;
                    let end = first + rng.below(5) as usize;
                    let doomed: Vec<Vec<u8>> = set
                        .iter_from(first, false)
                        .take(end - first)
                        .map(|entry| entry.member().to_vec())
                        .collect();
                    assert_eq!(set.remove_ranks(first, end), doomed.len());
                    for member in doomed {
                        model.remove(&member);
                    }
                }
            }
        }
        (set, model)
    }

    #[test]
    fn tree_invariants_hold_after_random_operations() {
        for seed in 0..40 {
            let (set, model) = random_set(seed, 2000);
            set.check()
                .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
            let mut expected: Vec<(f64, Vec<u8>)> = model
                .iter()
                .map(|(member, &score)| (score, member.clone()))
                .collect();
            expected.sort_by(|a, b| compare(a.0, &a.1, b.0, &b.1));
            let actual: Vec<(f64, Vec<u8>)> = set
                .iter()
                .map(|entry| (entry.score, entry.member().to_vec()))
                .collect();
            assert_eq!(actual, expected, "seed {seed}");
            // Ranks, selection and walks from every rank in both directions.
            for (rank, (score, member)) in expected.iter().enumerate() {
                assert_eq!(set.rank(member), Some((rank, *score)));
                assert_eq!(set.get(rank).map(Entry::member), Some(&member[..]));
                let down: Vec<&[u8]> = set.iter_from(rank, true).map(Entry::member).collect();
                let expected_down: Vec<&[u8]> = expected[..=rank]
                    .iter()
                    .rev()
                    .map(|(_, m)| &m[..])
                    .collect();
                assert_eq!(down, expected_down);
                assert_eq!(set.iter_from(rank, false).count(), expected.len() - rank);
            }
            assert_eq!(set.iter_from(expected.len(), false).count(), 0);
            assert_eq!(
                set.iter_from(expected.len() + 5, true).count(),
                expected.len()
            );
        }
    }

    #[test]
    fn tree_height_stays_logarithmic_for_sorted_insertions() {
        let mut tree = RankTree::default();
        for index in 0..10_000 {
            tree.insert(Entry::new(index as f64, b"m"));
        }
        tree.check().unwrap();
        for _ in 0..9_000 {
            tree.remove_at(0);
        }
        tree.check().unwrap();
        assert_eq!(tree.len(), 1000);
        assert_eq!(tree.get(0).map(|entry| entry.score), Some(9000.0));
        assert!(
            RankTree::from_sorted((0..1000).map(|i| Entry::new(i as f64, b"x")).collect())
                .check()
                .is_ok()
        );
    }

    #[test]
    fn scan_visits_everything_present_throughout() {
        let (mut set, _) = random_set(7, 3000);
        let before: std::collections::BTreeSet<Vec<u8>> =
            set.iter().map(|entry| entry.member().to_vec()).collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = set.scan(cursor, 7, |member, _| {
                seen.insert(member.to_vec());
            });
            steps += 1;
            // Changes between steps: new members and removed ones.
            set.set(format!("new{steps}").as_bytes(), steps as f64);
            if steps % 3 == 0 {
                set.pop(false);
            }
            if cursor == 0 {
                break;
            }
        }
        let after: std::collections::BTreeSet<Vec<u8>> =
            set.iter().map(|entry| entry.member().to_vec()).collect();
        for member in before.intersection(&after) {
            assert!(seen.contains(member), "{member:?} missed");
        }
        assert!(steps > 5);
    }
}
