//! The list value: a deque of elements, O(1) at both ends and by index.
//!
//! Elements of up to [`INLINE_STRING_BYTES`] bytes live inside the deque's slots
//! (24 bytes each, no allocation of their own); longer ones own one boxed slice.
//!
//! Redis 7.2 stores a small list as one listpack and a larger one as a
//! quicklist, and OBJECT ENCODING shows which. The list keeps the byte size that
//! a listpack of its elements would have (entry headers, integer encodings and
//! back-lengths included), so the two conversion rules can be applied exactly as
//! Redis applies them with the default `list-max-listpack-size -2`:
//!
//! - growing: before elements are added to a listpack, it becomes a quicklist
//!   when its size plus the added bytes would exceed 8 KB ([`ListValue::grow_check`]);
//! - shrinking: after elements are removed from a quicklist, it becomes a
//!   listpack again when it would fit in half that ([`ListValue::shrink_check`]).
//!
//! Redis's shrinking rule also needs the quicklist to have a single node; this
//! representation has no nodes, so it takes "fits in half a node" as that.

use crate::value::{canonical_i64, INLINE_STRING_BYTES};
use bytes::Bytes;
use std::collections::VecDeque;

/// The largest listpack a list may keep (`list-max-listpack-size -2`: 8 KB).
pub const LISTPACK_MAX_BYTES: usize = 8192;

/// An empty listpack: a 6-byte header (total bytes, element count) and the end
/// byte.
const LISTPACK_EMPTY_BYTES: usize = 7;

/// Which end of a list (`LEFT`/`RIGHT`, `LPUSH`/`RPUSH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl End {
    pub fn opposite(self) -> End {
        match self {
            End::Head => End::Tail,
            End::Tail => End::Head,
        }
    }
}

/// One list element.
#[derive(Clone, PartialEq, Eq)]
pub enum ListElement {
    /// Short elements, stored in place; bytes past `length` are zero.
    Inline {
        length: u8,
        data: [u8; INLINE_STRING_BYTES],
    },
    Heap(Box<[u8]>),
}

impl ListElement {
    pub fn new(bytes: &[u8]) -> ListElement {
        if bytes.len() <= INLINE_STRING_BYTES {
            let mut data = [0u8; INLINE_STRING_BYTES];
            data[..bytes.len()].copy_from_slice(bytes);
            return ListElement::Inline {
                length: bytes.len() as u8,
                data,
            };
        }
        ListElement::Heap(bytes.into())
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ListElement::Inline { length, data } => &data[..usize::from(*length)],
            ListElement::Heap(bytes) => bytes,
        }
    }

    /// The element as reply bytes (a long element's allocation is handed over).
    pub fn into_bytes(self) -> Bytes {
        match self {
            ListElement::Inline { .. } => Bytes::copy_from_slice(self.as_bytes()),
            ListElement::Heap(bytes) => Bytes::from(bytes),
        }
    }
}

impl std::fmt::Debug for ListElement {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A list value. Never empty while stored: commands delete a list when its last
/// element goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListValue {
    items: VecDeque<ListElement>,
    /// Bytes a listpack holding exactly these elements would take.
    packed_bytes: usize,
    /// Whether Redis would hold this list as a quicklist rather than a listpack.
    quicklist: bool,
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::new()
    }
}

impl ListValue {
    /// An empty list, encoded as a listpack (as Redis creates every list).
    pub fn new() -> ListValue {
        ListValue {
            items: VecDeque::new(),
            packed_bytes: LISTPACK_EMPTY_BYTES,
            quicklist: false,
        }
    }

    /// A list of `elements` in order, encoded as Redis encodes a loaded list: a
    /// listpack when it fits one, else a quicklist.
    pub fn from_elements<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> ListValue {
        let mut list = ListValue::new();
        for element in elements {
            list.push(End::Tail, element);
        }
        list.quicklist = list.packed_bytes > LISTPACK_MAX_BYTES;
        list
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn encoding_name(&self) -> &'static str {
        if self.quicklist {
            "quicklist"
        } else {
            "listpack"
        }
    }

    pub fn is_quicklist(&self) -> bool {
        self.quicklist
    }

    /// Sets the encoding as recorded elsewhere (a snapshot keeps it).
    pub fn set_quicklist(&mut self, quicklist: bool) {
        self.quicklist = quicklist;
    }

    /// Bytes a listpack of these elements takes (Redis's `lpBytes`).
    pub fn packed_bytes(&self) -> usize {
        self.packed_bytes
    }

    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.items.get(index).map(ListElement::as_bytes)
    }

    /// The elements from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.items.iter().map(ListElement::as_bytes)
    }

    /// The elements from `first` to `last` (inclusive, both in range).
    pub fn range(&self, first: usize, last: usize) -> impl Iterator<Item = &[u8]> {
        self.items.range(first..=last).map(ListElement::as_bytes)
    }

    /// Redis's check before adding elements of `added_bytes` bytes in total: a
    /// listpack that would grow past 8 KB becomes a quicklist.
    pub fn grow_check(&mut self, added_bytes: usize) {
        if !self.quicklist && self.packed_bytes.saturating_add(added_bytes) > LISTPACK_MAX_BYTES {
            self.quicklist = true;
        }
    }

    /// Redis's check after removing elements: a quicklist that fits half a
    /// listpack becomes a listpack again. Also returns spare deque capacity.
    pub fn shrink_check(&mut self) {
        if self.quicklist && self.packed_bytes <= LISTPACK_MAX_BYTES / 2 {
            self.quicklist = false;
        }
        let capacity = self.items.capacity();
        if capacity > 64 && capacity / 4 > self.items.len() {
            self.items.shrink_to(self.items.len() * 2);
        }
    }

    pub fn push(&mut self, end: End, element: &[u8]) {
        self.push_element(end, ListElement::new(element));
    }

    pub fn push_element(&mut self, end: End, element: ListElement) {
        self.packed_bytes += entry_bytes(element.as_bytes());
        match end {
            End::Head => self.items.push_front(element),
            End::Tail => self.items.push_back(element),
        }
    }

    pub fn pop(&mut self, end: End) -> Option<ListElement> {
        let element = match end {
            End::Head => self.items.pop_front(),
            End::Tail => self.items.pop_back(),
        }?;
        self.packed_bytes -= entry_bytes(element.as_bytes());
        Some(element)
    }

    /// Replaces the element at `index`; false when there is none.
    pub fn set(&mut self, index: usize, element: &[u8]) -> bool {
        let Some(slot) = self.items.get_mut(index) else {
            return false;
        };
        self.packed_bytes -= entry_bytes(slot.as_bytes());
        self.packed_bytes += entry_bytes(element);
        *slot = ListElement::new(element);
        true
    }

    /// Inserts `element` so that it ends up at `index` (at most the length).
    pub fn insert(&mut self, index: usize, element: &[u8]) {
        let index = index.min(self.items.len());
        self.packed_bytes += entry_bytes(element);
        self.items.insert(index, ListElement::new(element));
    }

    /// Removes up to `limit` elements equal to `element` (0: all), scanning
    /// from `from`; returns how many went. One pass over the list.
    pub fn remove_matching(&mut self, element: &[u8], limit: usize, from: End) -> usize {
        let mut removed = 0;
        let mut kept = VecDeque::with_capacity(self.items.len());
        let mut take = |item: ListElement, kept: &mut VecDeque<ListElement>| {
            if item.as_bytes() == element && (limit == 0 || removed < limit) {
                removed += 1;
                self.packed_bytes -= entry_bytes(item.as_bytes());
            } else {
                match from {
                    End::Head => kept.push_back(item),
                    End::Tail => kept.push_front(item),
                }
            }
        };
        let items = std::mem::take(&mut self.items);
        match from {
            End::Head => items.into_iter().for_each(|item| take(item, &mut kept)),
            End::Tail => items
                .into_iter()
                .rev()
                .for_each(|item| take(item, &mut kept)),
        }
        self.items = kept;
        removed
    }

    /// Drops `head` elements from the head and `tail` from the tail.
    pub fn trim(&mut self, head: usize, tail: usize) {
        for _ in 0..head.min(self.items.len()) {
            self.pop(End::Head);
        }
        for _ in 0..tail.min(self.items.len()) {
            self.pop(End::Tail);
        }
    }

    /// Sizes of the quicklist nodes Redis would hold these elements in, filling
    /// each node up to the listpack limit (for DEBUG OBJECT).
    pub fn node_sizes(&self) -> Vec<usize> {
        let mut nodes = Vec::new();
        let mut current = LISTPACK_EMPTY_BYTES;
        let mut count = 0;
        for element in self.iter() {
            let size = entry_bytes(element);
            if count > 0 && current + size > LISTPACK_MAX_BYTES {
                nodes.push(current);
                current = LISTPACK_EMPTY_BYTES;
                count = 0;
            }
            current += size;
            count += 1;
        }
        if count > 0 || nodes.is_empty() {
            nodes.push(current);
        }
        nodes
    }
}

/// Bytes one element takes in a listpack: its encoding header and data, then the
/// back-length that lets the listpack be walked backwards. Elements that read as
/// integers are stored as the smallest integer encoding that holds them.
pub fn entry_bytes(element: &[u8]) -> usize {
    let encoded = match canonical_i64(element) {
        Some(integer) => integer_entry_bytes(integer),
        None if element.len() < 64 => 1 + element.len(),
        None if element.len() < 4096 => 2 + element.len(),
        None => 5 + element.len(),
    };
    encoded + back_length_bytes(encoded)
}

fn integer_entry_bytes(integer: i64) -> usize {
    if (0..=127).contains(&integer) {
        1
    } else if (-4096..=4095).contains(&integer) {
        2
    } else if i16::try_from(integer).is_ok() {
        3
    } else if (-(1 << 23)..(1 << 23)).contains(&integer) {
        4
    } else if i32::try_from(integer).is_ok() {
        5
    } else {
        9
    }
}

fn back_length_bytes(encoded: usize) -> usize {
    match encoded {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(elements: &[&str]) -> ListValue {
        ListValue::from_elements(elements.iter().map(|element| element.as_bytes()))
    }

    fn contents(list: &ListValue) -> Vec<String> {
        list.iter()
            .map(|element| String::from_utf8_lossy(element).into_owned())
            .collect()
    }

    #[test]
    fn listpack_entry_sizes() {
        assert_eq!(entry_bytes(b"7"), 2);
        assert_eq!(entry_bytes(b"127"), 2);
        assert_eq!(entry_bytes(b"128"), 3);
        assert_eq!(entry_bytes(b"-4096"), 3);
        assert_eq!(entry_bytes(b"4096"), 4);
        assert_eq!(entry_bytes(b"-32768"), 4);
        assert_eq!(entry_bytes(b"8388607"), 5);
        assert_eq!(entry_bytes(b"2147483647"), 6);
        assert_eq!(entry_bytes(b"2147483648"), 10);
        assert_eq!(entry_bytes(b"007"), 5);
        assert_eq!(entry_bytes(b""), 2);
        assert_eq!(entry_bytes(&[b'a'; 63]), 65);
        assert_eq!(entry_bytes(&[b'a'; 64]), 67);
        assert_eq!(entry_bytes(&[b'a'; 200]), 204);
        assert_eq!(entry_bytes(&[b'a'; 4096]), 4096 + 5 + 2);
    }

    #[test]
    fn elements_are_compact() {
        assert_eq!(std::mem::size_of::<ListElement>(), 24);
        assert!(matches!(
            ListElement::new(&[b'i'; 22]),
            ListElement::Inline { .. }
        ));
        assert!(matches!(
            ListElement::new(&[b'h'; 23]),
            ListElement::Heap(_)
        ));
        assert_eq!(
            ListElement::new(b"abc").into_bytes(),
            Bytes::from_static(b"abc")
        );
        assert_eq!(ListElement::new(&[b'h'; 23]).into_bytes().len(), 23);
    }

    #[test]
    fn both_ends_and_indexes() {
        let mut list = ListValue::new();
        list.push(End::Tail, b"b");
        list.push(End::Head, b"a");
        list.push(End::Tail, &[b'c'; 30]);
        assert_eq!(list.len(), 3);
        assert_eq!(list.get(0), Some(&b"a"[..]));
        assert_eq!(list.get(2), Some(&[b'c'; 30][..]));
        assert_eq!(list.pop(End::Tail).unwrap().into_bytes().len(), 30);
        assert!(list.set(1, b"B"));
        assert!(!list.set(2, b"x"));
        list.insert(1, b"mid");
        assert_eq!(contents(&list), ["a", "mid", "B"]);
        // One-byte header and back-length around each short string.
        assert_eq!(
            list.packed_bytes(),
            LISTPACK_EMPTY_BYTES + 3 + 5 + 3,
            "sizes follow every change"
        );
    }

    #[test]
    fn remove_matching_from_either_end() {
        let mut from_head = list(&["x", "a", "x", "b", "x"]);
        assert_eq!(from_head.remove_matching(b"x", 2, End::Head), 2);
        assert_eq!(contents(&from_head), ["a", "b", "x"]);
        let mut from_tail = list(&["x", "a", "x", "b", "x"]);
        assert_eq!(from_tail.remove_matching(b"x", 2, End::Tail), 2);
        assert_eq!(contents(&from_tail), ["x", "a", "b"]);
        let mut all = list(&["x", "a", "x"]);
        assert_eq!(all.remove_matching(b"x", 0, End::Head), 2);
        assert_eq!(all, list(&["a"]));
    }

    #[test]
    fn encodings_follow_redis_rules() {
        let mut list = ListValue::new();
        assert_eq!(list.encoding_name(), "listpack");
        // 7 + 8185 = 8192 bytes of arguments still fit.
        list.grow_check(8185);
        assert_eq!(list.encoding_name(), "listpack");
        list.grow_check(8186);
        assert_eq!(list.encoding_name(), "quicklist");
        list.push(End::Tail, &[b'x'; 8186]);
        list.push(End::Tail, b"small");
        list.pop(End::Head);
        list.shrink_check();
        assert_eq!(list.encoding_name(), "listpack");
        let big = ListValue::from_elements((0..2000).map(|_| &b"0123456789"[..]));
        assert_eq!(big.encoding_name(), "quicklist");
        assert_eq!(big.node_sizes().len(), 3);
        assert_eq!(ListValue::new().node_sizes(), [LISTPACK_EMPTY_BYTES]);
    }

    #[test]
    fn trim_and_capacity() {
        let mut list = ListValue::from_elements((0..1000).map(|_| &b"e"[..]));
        list.trim(400, 590);
        assert_eq!(list.len(), 10);
        list.shrink_check();
        assert!(list.items.capacity() < 100);
        assert_eq!(list.packed_bytes(), LISTPACK_EMPTY_BYTES + 10 * 3);
        list.trim(100, 100);
        assert!(list.is_empty());
    }
}
