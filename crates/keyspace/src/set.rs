//! The set value: members in one of Redis 7.2's three encodings.
//!
//! - `intset`: a sorted vector of integers (every member a canonical decimal
//!   integer, as `string2ll` reads them).
//! - `listpack`: a small vector of members in insertion order, searched
//!   linearly; removal keeps the order. Members of up to 22 bytes are inline.
//! - `hashtable`: an [`IndexedTable`] of members (see `indexed.rs`).
//!
//! Conversions are Redis's (`t_set.c`), with the defaults
//! `set-max-intset-entries 512`, `set-max-listpack-entries 128` and
//! `set-max-listpack-value 64`: a new set is an intset when its first member is
//! an integer and the command brings at most 512 members, else a listpack when
//! it brings at most 128, else a hashtable ([`SetValue::create`]); a write that
//! brings more members than the encoding allows converts to a hashtable first
//! ([`SetValue::prepare_for`]); adding a non-integer to an intset gives a
//! listpack when it fits, else a hashtable; a too-large intset or listpack
//! becomes a hashtable ([`SetValue::add`]). Only SINTERSTORE (an all-integer
//! result) and SPOP's rebuild ever go back to a smaller encoding.
//!
//! Iteration order (SMEMBERS, SSCAN, DUMP) is storage order, a function of the
//! commands applied, so replicas agree on it.

use crate::indexed::{IndexedTable, Keyed};
use crate::list::ListElement;
use crate::value::canonical_i64;
use std::borrow::Cow;

/// `set-max-intset-entries`.
pub const MAX_INTSET_ENTRIES: usize = 512;
/// `set-max-listpack-entries`.
pub const MAX_LISTPACK_ENTRIES: usize = 128;
/// `set-max-listpack-value`.
pub const MAX_LISTPACK_VALUE: usize = 64;

impl Keyed for ListElement {
    fn key(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// The encodings, for loads that must restore one exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetEncoding {
    Intset,
    Listpack,
    Table,
}

/// A set value. Never empty while stored: commands delete a set when its last
/// member goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetValue {
    Intset(Vec<i64>),
    Listpack(Vec<ListElement>),
    Table(IndexedTable<ListElement>),
}

impl SetValue {
    /// Redis's `setTypeCreate`: an empty set fit for `first`, when the command
    /// will add about `size_hint` members.
    pub fn create(first: &[u8], size_hint: usize) -> SetValue {
        if canonical_i64(first).is_some() && size_hint <= MAX_INTSET_ENTRIES {
            SetValue::Intset(Vec::new())
        } else if size_hint <= MAX_LISTPACK_ENTRIES {
            SetValue::Listpack(Vec::new())
        } else {
            SetValue::Table(IndexedTable::new())
        }
    }

    /// The empty intset Redis starts SUNIONSTORE/SDIFFSTORE results with.
    pub fn empty_intset() -> SetValue {
        SetValue::Intset(Vec::new())
    }

    /// The empty listpack Redis starts some results with.
    pub fn empty_listpack() -> SetValue {
        SetValue::Listpack(Vec::new())
    }

    /// A set of `members` as a load encodes it: an intset when all are
    /// integers and few enough, else a listpack when they fit one, else a
    /// hashtable; order kept (an intset sorts). None when a member repeats.
    pub fn load(members: Vec<Vec<u8>>) -> Option<SetValue> {
        let encoding = if members.len() <= MAX_INTSET_ENTRIES
            && members.iter().all(|member| canonical_i64(member).is_some())
        {
            SetEncoding::Intset
        } else if members.len() <= MAX_LISTPACK_ENTRIES
            && members
                .iter()
                .all(|member| member.len() <= MAX_LISTPACK_VALUE)
        {
            SetEncoding::Listpack
        } else {
            SetEncoding::Table
        };
        if encoding == SetEncoding::Intset {
            let mut integers: Vec<i64> = members
                .iter()
                .filter_map(|member| canonical_i64(member))
                .collect();
            integers.sort_unstable();
            if integers.windows(2).any(|pair| pair[0] == pair[1]) {
                return None;
            }
            return Some(SetValue::Intset(integers));
        }
        SetValue::with_layout(members, encoding)
    }

    /// `members` in exactly this order and encoding (a snapshot keeps both).
    /// None when a member repeats, or for an intset, when a member is not an
    /// integer or the members are not in ascending order.
    pub fn with_layout(members: Vec<Vec<u8>>, encoding: SetEncoding) -> Option<SetValue> {
        match encoding {
            SetEncoding::Intset => {
                let integers = members
                    .iter()
                    .map(|member| canonical_i64(member))
                    .collect::<Option<Vec<i64>>>()?;
                if integers.windows(2).any(|pair| pair[0] >= pair[1]) {
                    return None;
                }
                Some(SetValue::Intset(integers))
            }
            SetEncoding::Listpack => {
                let mut seen = std::collections::BTreeSet::new();
                if !members.iter().all(|member| seen.insert(&member[..])) {
                    return None;
                }
                Some(SetValue::Listpack(
                    members
                        .iter()
                        .map(|member| ListElement::new(member))
                        .collect(),
                ))
            }
            SetEncoding::Table => IndexedTable::from_entries(
                members
                    .iter()
                    .map(|member| ListElement::new(member))
                    .collect(),
            )
            .map(SetValue::Table),
        }
    }

    pub fn encoding(&self) -> SetEncoding {
        match self {
            SetValue::Intset(_) => SetEncoding::Intset,
            SetValue::Listpack(_) => SetEncoding::Listpack,
            SetValue::Table(_) => SetEncoding::Table,
        }
    }

    pub fn encoding_name(&self) -> &'static str {
        match self {
            SetValue::Intset(_) => "intset",
            SetValue::Listpack(_) => "listpack",
            SetValue::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetValue::Intset(integers) => integers.len(),
            SetValue::Listpack(members) => members.len(),
            SetValue::Table(table) => table.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The member at `position` in storage order.
    pub fn member(&self, position: usize) -> Cow<'_, [u8]> {
        match self {
            SetValue::Intset(integers) => Cow::Owned(integers[position].to_string().into_bytes()),
            SetValue::Listpack(members) => Cow::Borrowed(members[position].as_bytes()),
            SetValue::Table(table) => Cow::Borrowed(
                table
                    .get(position)
                    .expect("position within the set")
                    .as_bytes(),
            ),
        }
    }

    /// Every member in storage order.
    pub fn members(&self) -> impl Iterator<Item = Cow<'_, [u8]>> + '_ {
        (0..self.len()).map(|position| self.member(position))
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.position(member).is_some()
    }

    fn position(&self, member: &[u8]) -> Option<usize> {
        match self {
            SetValue::Intset(integers) => integers.binary_search(&canonical_i64(member)?).ok(),
            SetValue::Listpack(members) => members
                .iter()
                .position(|stored| stored.as_bytes() == member),
            SetValue::Table(table) => table.find(member),
        }
    }

    /// Redis's `setTypeMaybeConvert`: a write that brings `size_hint` members
    /// turns an intset or listpack that could not hold that many into a
    /// hashtable first.
    pub fn prepare_for(&mut self, size_hint: usize) {
        let too_many = match self {
            SetValue::Intset(_) => size_hint > MAX_INTSET_ENTRIES,
            SetValue::Listpack(_) => size_hint > MAX_LISTPACK_ENTRIES,
            SetValue::Table(_) => false,
        };
        if too_many {
            self.convert_to_table();
        }
    }

    /// Adds `member`; true when it is new. Converts as Redis's `setTypeAdd`.
    pub fn add(&mut self, member: &[u8]) -> bool {
        match self {
            SetValue::Intset(integers) => match canonical_i64(member) {
                Some(integer) => {
                    let Err(position) = integers.binary_search(&integer) else {
                        return false;
                    };
                    integers.insert(position, integer);
                    if integers.len() > MAX_INTSET_ENTRIES {
                        self.convert_to_table();
                    }
                    true
                }
                None => {
                    // The longest integer's text bounds every member's size.
                    let widest = match (integers.first(), integers.last()) {
                        (Some(low), Some(high)) => decimal_width(*low).max(decimal_width(*high)),
                        _ => 0,
                    };
                    if integers.len() < MAX_LISTPACK_ENTRIES
                        && member.len() <= MAX_LISTPACK_VALUE
                        && widest <= MAX_LISTPACK_VALUE
                    {
                        let members = integers
                            .iter()
                            .map(|integer| ListElement::new(integer.to_string().as_bytes()))
                            .collect();
                        *self = SetValue::Listpack(members);
                    } else {
                        self.convert_to_table();
                    }
                    self.add(member)
                }
            },
            SetValue::Listpack(members) => {
                if members.iter().any(|stored| stored.as_bytes() == member) {
                    return false;
                }
                if members.len() < MAX_LISTPACK_ENTRIES && member.len() <= MAX_LISTPACK_VALUE {
                    members.push(ListElement::new(member));
                    return true;
                }
                self.convert_to_table();
                self.add(member)
            }
            SetValue::Table(table) => {
                if table.find(member).is_some() {
                    return false;
                }
                table.push_new(ListElement::new(member))
            }
        }
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.position(member) {
            Some(position) => {
                self.remove_at(position);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the member at `position`. A listpack or intset keeps
    /// its order; a hashtable moves its last member into the hole.
    pub fn remove_at(&mut self, position: usize) -> Vec<u8> {
        match self {
            SetValue::Intset(integers) => integers.remove(position).to_string().into_bytes(),
            SetValue::Listpack(members) => members.remove(position).as_bytes().to_vec(),
            SetValue::Table(table) => table.swap_remove(position).as_bytes().to_vec(),
        }
    }

    /// Redis's `maybeConvertToIntset`, for a set known to hold only integers:
    /// becomes an intset when it may be one.
    pub fn convert_to_intset_if_integers(&mut self) {
        if matches!(self, SetValue::Intset(_)) || self.len() > MAX_INTSET_ENTRIES {
            return;
        }
        let Some(mut integers) = self
            .members()
            .map(|member| canonical_i64(&member))
            .collect::<Option<Vec<i64>>>()
        else {
            return;
        };
        integers.sort_unstable();
        *self = SetValue::Intset(integers);
    }

    /// One SSCAN step: an intset or listpack answers everything at once
    /// (cursor 0), a hashtable `count` members from the cursor.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(&[u8])) -> u64 {
        match self {
            SetValue::Table(table) => table.scan(cursor, count, |member| visit(member.as_bytes())),
            _ => {
                self.members().for_each(|member| visit(&member));
                0
            }
        }
    }

    fn convert_to_table(&mut self) {
        let members: Vec<ListElement> = match self {
            SetValue::Table(_) => return,
            SetValue::Intset(integers) => integers
                .iter()
                .map(|integer| ListElement::new(integer.to_string().as_bytes()))
                .collect(),
            SetValue::Listpack(members) => std::mem::take(members),
        };
        *self =
            SetValue::Table(IndexedTable::from_entries(members).expect("set members are unique"));
    }

    /// Bytes Redis's listpack of these members takes (`lpBytes`).
    pub fn listpack_bytes(&self) -> usize {
        7 + self
            .members()
            .map(|member| crate::list::entry_bytes(&member))
            .sum::<usize>()
    }

    /// Bytes Redis's intset of these members takes: an 8-byte header and each
    /// integer in the narrowest width that holds them all.
    pub fn intset_bytes(&self) -> usize {
        let SetValue::Intset(integers) = self else {
            return 0;
        };
        let fits = |low: i64, high: i64| integers.iter().all(|i| (low..=high).contains(i));
        let width = if fits(i16::MIN.into(), i16::MAX.into()) {
            2
        } else if fits(i32::MIN.into(), i32::MAX.into()) {
            4
        } else {
            8
        };
        8 + integers.len() * width
    }
}

/// Characters in the decimal form of `integer` (Redis's `sdigits10`).
fn decimal_width(integer: i64) -> usize {
    integer.to_string().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(set: &SetValue) -> Vec<String> {
        set.members()
            .map(|member| String::from_utf8_lossy(&member).into_owned())
            .collect()
    }

    fn set_of(items: &[&str]) -> SetValue {
        let mut set = SetValue::create(items[0].as_bytes(), items.len());
        set.prepare_for(items.len());
        for item in items {
            set.add(item.as_bytes());
        }
        set
    }

    #[test]
    fn intsets_stay_sorted_and_convert() {
        let mut set = set_of(&["5", "-3", "10", "5"]);
        assert_eq!(set.encoding_name(), "intset");
        assert_eq!(members(&set), ["-3", "5", "10"]);
        assert!(set.contains(b"10"));
        assert!(!set.contains(b"010"));
        assert!(set.add(b"x"));
        assert_eq!(set.encoding_name(), "listpack");
        assert_eq!(members(&set), ["-3", "5", "10", "x"]);

        let mut big = SetValue::create(b"1", 1);
        for index in 0..512 {
            big.add(index.to_string().as_bytes());
        }
        assert_eq!(big.encoding_name(), "intset");
        big.add(b"512");
        assert_eq!(big.encoding_name(), "hashtable");

        // An intset too large for a listpack goes straight to a hashtable.
        let mut wide = SetValue::create(b"1", 1);
        for index in 0..128 {
            wide.add(index.to_string().as_bytes());
        }
        wide.add(b"x");
        assert_eq!(wide.encoding_name(), "hashtable");
    }

    #[test]
    fn listpacks_keep_order_and_convert() {
        let mut set = set_of(&["b", "a", "c"]);
        assert_eq!(set.encoding_name(), "listpack");
        assert!(set.remove(b"a"));
        assert_eq!(members(&set), ["b", "c"]);
        set.add(&[b'x'; 65]);
        assert_eq!(set.encoding_name(), "hashtable");
        let mut full = SetValue::create(b"a", 1);
        for index in 0..128 {
            full.add(format!("m{index}").as_bytes());
        }
        assert_eq!(full.encoding_name(), "listpack");
        full.add(b"another");
        assert_eq!(full.encoding_name(), "hashtable");
        let mut hinted = SetValue::create(b"a", 1);
        hinted.add(b"a");
        hinted.prepare_for(129);
        assert_eq!(hinted.encoding_name(), "hashtable");
        assert_eq!(SetValue::create(b"1", 512).encoding_name(), "intset");
        assert_eq!(SetValue::create(b"1", 513).encoding_name(), "hashtable");
        assert_eq!(SetValue::create(b"1", 100).encoding_name(), "intset");
        assert_eq!(SetValue::create(b"a", 129).encoding_name(), "hashtable");
    }

    #[test]
    fn loads_and_layouts() {
        let loaded = SetValue::load(vec![b"3".to_vec(), b"1".to_vec()]).unwrap();
        assert_eq!(loaded.encoding_name(), "intset");
        assert_eq!(members(&loaded), ["1", "3"]);
        assert!(SetValue::load(vec![b"a".to_vec(), b"a".to_vec()]).is_none());
        assert!(SetValue::load(vec![b"1".to_vec(), b"1".to_vec()]).is_none());
        assert!(
            SetValue::with_layout(vec![b"3".to_vec(), b"1".to_vec()], SetEncoding::Intset)
                .is_none()
        );
        let table =
            SetValue::with_layout(vec![b"b".to_vec(), b"a".to_vec()], SetEncoding::Table).unwrap();
        assert_eq!(members(&table), ["b", "a"]);
    }

    #[test]
    fn back_to_intset_when_all_integers() {
        let mut set = set_of(&["a", "1", "2"]);
        set.remove(b"a");
        set.convert_to_intset_if_integers();
        assert_eq!(set.encoding_name(), "intset");
        let mut mixed = set_of(&["a", "1"]);
        mixed.convert_to_intset_if_integers();
        assert_eq!(mixed.encoding_name(), "listpack");
    }

    #[test]
    fn sizes() {
        assert_eq!(set_of(&["1", "2"]).intset_bytes(), 8 + 4);
        assert_eq!(set_of(&["1", "100000"]).intset_bytes(), 8 + 8);
        assert_eq!(set_of(&["a", "bc"]).listpack_bytes(), 7 + 3 + 4);
    }
}
