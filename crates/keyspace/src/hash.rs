//! The hash value: field-value pairs in one of Redis 7.2's two encodings.
//!
//! - `listpack`: a small vector of pairs in insertion order, searched linearly;
//!   removal keeps the order (as deleting from a listpack does). Fields and
//!   values of up to 22 bytes are stored inline.
//! - `hashtable`: an [`IndexedTable`] of pairs (see `indexed.rs`).
//!
//! A hash starts as a listpack and becomes a hashtable, never back, by Redis's
//! rules with the default `hash-max-listpack-entries 512` and
//! `hash-max-listpack-value 64`: before a write, when it brings more than 512
//! pairs or an argument longer than 64 bytes ([`HashValue::prepare_for`]); on
//! every set, when the field or value is longer than 64 bytes, and after it,
//! when the hash holds more than 512 pairs ([`HashValue::set`]).
//!
//! Iteration order (HGETALL, HKEYS, HSCAN, DUMP) is storage order, a function
//! of the commands applied, so replicas agree on it.

use crate::indexed::{IndexedTable, Keyed};
use crate::list::ListElement;

/// `hash-max-listpack-entries`.
pub const MAX_LISTPACK_ENTRIES: usize = 512;
/// `hash-max-listpack-value`.
pub const MAX_LISTPACK_VALUE: usize = 64;

/// One field and its value.
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    field: ListElement,
    value: ListElement,
}

impl Pair {
    pub fn new(field: &[u8], value: &[u8]) -> Pair {
        Pair {
            field: ListElement::new(field),
            value: ListElement::new(value),
        }
    }

    pub fn field(&self) -> &[u8] {
        self.field.as_bytes()
    }

    pub fn value(&self) -> &[u8] {
        self.value.as_bytes()
    }
}

impl Keyed for Pair {
    fn key(&self) -> &[u8] {
        self.field.as_bytes()
    }
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}: {:?}", self.field, self.value)
    }
}

/// A hash value. Never empty while stored: commands delete a hash when its
/// last field goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashValue {
    Listpack(Vec<Pair>),
    Table(IndexedTable<Pair>),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl HashValue {
    /// An empty hash, encoded as a listpack (as Redis creates every hash).
    pub fn new() -> HashValue {
        HashValue::Listpack(Vec::new())
    }

    /// A hash of `pairs` in order (later duplicates replace earlier values),
    /// encoded as Redis encodes a hash it loads: a listpack when the pairs fit
    /// one, else a hashtable.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> HashValue {
        let pairs: Vec<(&[u8], &[u8])> = pairs.into_iter().collect();
        let mut hash = HashValue::new();
        if pairs.len() > MAX_LISTPACK_ENTRIES
            || pairs.iter().any(|(field, value)| {
                field.len() > MAX_LISTPACK_VALUE || value.len() > MAX_LISTPACK_VALUE
            })
        {
            hash.convert_to_table();
        }
        for (field, value) in pairs {
            hash.set(field, value);
        }
        hash
    }

    /// The pairs as loaded (DUMP payloads), in order, encoded as Redis encodes
    /// a hash it loads: a listpack when they fit one, else a hashtable. None
    /// when a field repeats.
    pub fn load(pairs: Vec<Pair>) -> Option<HashValue> {
        let table = pairs.len() > MAX_LISTPACK_ENTRIES
            || pairs.iter().any(|pair| {
                pair.field().len() > MAX_LISTPACK_VALUE || pair.value().len() > MAX_LISTPACK_VALUE
            });
        HashValue::with_layout(pairs, table)
    }

    /// The pairs exactly as given, in the given encoding (a snapshot keeps
    /// both); None when a field repeats.
    pub fn with_layout(pairs: Vec<Pair>, table: bool) -> Option<HashValue> {
        if table {
            return IndexedTable::from_entries(pairs).map(HashValue::Table);
        }
        let mut seen = std::collections::BTreeSet::new();
        if !pairs.iter().all(|pair| seen.insert(pair.field())) {
            return None;
        }
        Some(HashValue::Listpack(pairs))
    }

    pub fn len(&self) -> usize {
        match self {
            HashValue::Listpack(pairs) => pairs.len(),
            HashValue::Table(table) => table.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn encoding_name(&self) -> &'static str {
        match self {
            HashValue::Listpack(_) => "listpack",
            HashValue::Table(_) => "hashtable",
        }
    }

    pub fn is_table(&self) -> bool {
        matches!(self, HashValue::Table(_))
    }

    /// The pairs in storage order.
    pub fn pairs(&self) -> &[Pair] {
        match self {
            HashValue::Listpack(pairs) => pairs,
            HashValue::Table(table) => table.entries(),
        }
    }

    fn position(&self, field: &[u8]) -> Option<usize> {
        match self {
            HashValue::Listpack(pairs) => pairs.iter().position(|pair| pair.field() == field),
            HashValue::Table(table) => table.find(field),
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.position(field)
            .map(|position| self.pairs()[position].value())
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.position(field).is_some()
    }

    /// Redis's `hashTypeTryConversion` before a write of `arguments` (fields
    /// and values alternating): a listpack becomes a hashtable when the write
    /// brings more pairs than a listpack may hold or any argument is too long.
    pub fn prepare_for<'a>(&mut self, arguments: impl ExactSizeIterator<Item = &'a [u8]>) {
        if self.is_table() {
            return;
        }
        let mut arguments = arguments;
        if arguments.len() / 2 > MAX_LISTPACK_ENTRIES
            || arguments.any(|argument| argument.len() > MAX_LISTPACK_VALUE)
        {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`; true when the field is new. Converts as Redis's
    /// `hashTypeSet` does: before, for a long field or value; after, when the
    /// listpack holds too many pairs.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        if !self.is_table()
            && (field.len() > MAX_LISTPACK_VALUE || value.len() > MAX_LISTPACK_VALUE)
        {
            self.convert_to_table();
        }
        let added = match self {
            HashValue::Listpack(pairs) => {
                match pairs.iter_mut().find(|pair| pair.field() == field) {
                    Some(pair) => {
                        pair.value = ListElement::new(value);
                        false
                    }
                    None => {
                        pairs.push(Pair::new(field, value));
                        true
                    }
                }
            }
            HashValue::Table(table) => match table.find(field) {
                Some(position) => {
                    if let Some(pair) = table.get_mut(position) {
                        pair.value = ListElement::new(value);
                    }
                    false
                }
                None => table.push_new(Pair::new(field, value)),
            },
        };
        if let HashValue::Listpack(pairs) = self {
            if pairs.len() > MAX_LISTPACK_ENTRIES {
                self.convert_to_table();
            }
        }
        added
    }

    /// Removes `field`; true when it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let Some(position) = self.position(field) else {
            return false;
        };
        match self {
            HashValue::Listpack(pairs) => {
                pairs.remove(position);
            }
            HashValue::Table(table) => {
                table.swap_remove(position);
            }
        }
        true
    }

    /// One HSCAN step: a listpack answers everything at once (cursor 0), a
    /// hashtable `count` pairs from the cursor (see [`IndexedTable::scan`]).
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&Pair)) -> u64 {
        match self {
            HashValue::Listpack(pairs) => {
                pairs.iter().for_each(visit);
                0
            }
            HashValue::Table(table) => table.scan(cursor, count, |pair| visit(pair)),
        }
    }

    fn convert_to_table(&mut self) {
        if let HashValue::Listpack(pairs) = self {
            let pairs = std::mem::take(pairs);
            *self = HashValue::Table(
                IndexedTable::from_entries(pairs).expect("listpack fields are unique"),
            );
        }
    }

    /// Bytes Redis's listpack of these pairs takes (`lpBytes`).
    pub fn listpack_bytes(&self) -> usize {
        7 + self
            .pairs()
            .iter()
            .map(|pair| {
                crate::list::entry_bytes(pair.field()) + crate::list::entry_bytes(pair.value())
            })
            .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(hash: &HashValue) -> Vec<String> {
        hash.pairs()
            .iter()
            .map(|pair| String::from_utf8_lossy(pair.field()).into_owned())
            .collect()
    }

    #[test]
    fn listpack_keeps_insertion_order() {
        let mut hash = HashValue::new();
        assert!(hash.set(b"b", b"1"));
        assert!(hash.set(b"a", b"2"));
        assert!(hash.set(b"c", b"3"));
        assert!(!hash.set(b"a", b"22"));
        assert!(hash.remove(b"b"));
        assert!(!hash.remove(b"b"));
        assert_eq!(fields(&hash), ["a", "c"]);
        assert_eq!(hash.get(b"a"), Some(&b"22"[..]));
        assert_eq!(hash.encoding_name(), "listpack");
    }

    #[test]
    fn conversions_follow_redis() {
        let mut hash = HashValue::new();
        for index in 0..512 {
            hash.set(format!("f{index}").as_bytes(), b"v");
        }
        assert_eq!(hash.encoding_name(), "listpack");
        hash.set(b"one-more", b"v");
        assert_eq!(hash.encoding_name(), "hashtable");
        // Never back.
        for index in 0..512 {
            hash.remove(format!("f{index}").as_bytes());
        }
        assert_eq!(hash.encoding_name(), "hashtable");
        assert_eq!(hash.len(), 1);

        let mut long = HashValue::new();
        long.set(b"f", &[b'v'; 64]);
        assert_eq!(long.encoding_name(), "listpack");
        long.set(b"g", &[b'v'; 65]);
        assert_eq!(long.encoding_name(), "hashtable");

        let mut prepared = HashValue::new();
        prepared.prepare_for([&b"f"[..], &[b'x'; 65]].into_iter());
        assert!(prepared.is_table());
    }

    #[test]
    fn loads_pick_the_encoding_by_size() {
        let small = HashValue::from_pairs([(&b"a"[..], &b"1"[..]), (b"b", b"2")]);
        assert_eq!(small.encoding_name(), "listpack");
        let many: Vec<(Vec<u8>, Vec<u8>)> = (0..600)
            .map(|index| (format!("f{index}").into_bytes(), b"v".to_vec()))
            .collect();
        let big = HashValue::from_pairs(many.iter().map(|(f, v)| (&f[..], &v[..])));
        assert_eq!(big.encoding_name(), "hashtable");
        assert_eq!(big.len(), 600);
        assert!(
            HashValue::with_layout(vec![Pair::new(b"a", b"1"), Pair::new(b"a", b"2")], false)
                .is_none()
        );
    }

    #[test]
    fn listpack_size_matches_redis() {
        let hash = HashValue::from_pairs([(&b"field"[..], &b"12"[..])]);
        // Header and end byte, "field" (1 + 5 + 1), 12 as a 7-bit integer (1 + 1).
        assert_eq!(hash.listpack_bytes(), 7 + 7 + 2);
    }
}
