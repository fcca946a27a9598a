//! The list value: elements packed into chunks of a few KB, O(1) at both
//! ends, a few bytes per element besides its own.
//!
//! [`ListElement`] (an element on its own, as a pop hands it out, and as sets,
//! hashes and sorted sets hold members) keeps up to [`INLINE_STRING_BYTES`]
//! bytes in place (24 bytes, no allocation of its own); longer ones own one
//! boxed slice.
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
//! representation's chunks are not Redis's nodes, so it takes "fits in half a node" as that.

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

/// Most bytes of encoded elements a chunk takes before the next element
/// starts a chunk of its own (an element larger than this has a chunk alone).
const CHUNK_BYTES: usize = 4096;

/// Smallest buffer a chunk is given; it doubles up to [`CHUNK_BYTES`].
const CHUNK_START_BYTES: usize = 64;

/// A run of elements packed into one buffer, each as its length (LEB128),
/// its bytes, and its length again written backwards, so the run can be
/// walked from either end. The elements take `data[head..tail]`; the room
/// before `head` and after `tail` takes pushes at either end without
/// moving anything.
#[derive(Clone)]
struct Chunk {
    data: Box<[u8]>,
    head: usize,
    tail: usize,
    count: usize,
}

/// Bytes an element of `length` bytes takes in a chunk.
fn packed_len(length: usize) -> usize {
    2 * varint_len(length) + length
}

fn varint_len(mut value: usize) -> usize {
    let mut bytes = 1;
    while value >= 0x80 {
        value >>= 7;
        bytes += 1;
    }
    bytes
}

/// Writes `element` packed at `at`; returns the end of what it wrote.
fn write_packed(data: &mut [u8], mut at: usize, element: &[u8]) -> usize {
    let length = element.len();
    let mut value = length;
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            data[at] = byte;
            at += 1;
            break;
        }
        data[at] = byte | 0x80;
        at += 1;
    }
    data[at..at + length].copy_from_slice(element);
    at += length;
    // The back-length: the same groups of seven bits, least significant
    // last, so that a walk backwards meets it first.
    let groups = varint_len(length);
    for group in 0..groups {
        let byte = ((length >> (7 * group)) & 0x7f) as u8;
        let more = if group + 1 < groups { 0x80 } else { 0 };
        data[at + groups - 1 - group] = byte | more;
    }
    at + groups
}

/// The element starting at `at` and the position after it.
fn read_forward(data: &[u8], mut at: usize) -> (&[u8], usize) {
    let mut length = 0usize;
    let mut shift = 0;
    loop {
        let byte = data[at];
        at += 1;
        length |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let element = &data[at..at + length];
    (element, at + length + varint_len(length))
}

/// The element ending at `end` and the position it starts at.
fn read_backward(data: &[u8], mut end: usize) -> (&[u8], usize) {
    let mut length = 0usize;
    let mut shift = 0;
    loop {
        end -= 1;
        let byte = data[end];
        length |= usize::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let start = end - length;
    (&data[start..end], start - varint_len(length))
}

impl Chunk {
    /// An empty chunk with room for `needed` bytes, all of it on the side
    /// the elements will come from.
    fn with_room(needed: usize, end: End) -> Chunk {
        let size = needed.max(CHUNK_START_BYTES);
        let at = match end {
            End::Head => size,
            End::Tail => 0,
        };
        Chunk {
            data: vec![0u8; size].into_boxed_slice(),
            head: at,
            tail: at,
            count: 0,
        }
    }

    fn used(&self) -> usize {
        self.tail - self.head
    }

    /// Whether an element of `length` packed bytes may join this chunk.
    fn takes(&self, length: usize) -> bool {
        self.used() + length <= CHUNK_BYTES
    }

    /// Makes room for `needed` bytes at `end`, growing the buffer (doubling,
    /// the new room on that side) when the room there is short.
    fn reserve(&mut self, needed: usize, end: End) {
        let room = match end {
            End::Head => self.head,
            End::Tail => self.data.len() - self.tail,
        };
        if room >= needed {
            return;
        }
        let used = self.used();
        let size = (self.data.len() * 2)
            .max(used + needed)
            .min(CHUNK_BYTES.max(used + needed));
        let mut data = vec![0u8; size].into_boxed_slice();
        let head = match end {
            End::Head => size - used,
            End::Tail => 0,
        };
        data[head..head + used].copy_from_slice(&self.data[self.head..self.tail]);
        self.data = data;
        self.head = head;
        self.tail = head + used;
    }

    fn push(&mut self, end: End, element: &[u8]) {
        let length = packed_len(element.len());
        self.reserve(length, end);
        match end {
            End::Head => {
                let at = self.head - length;
                write_packed(&mut self.data, at, element);
                self.head = at;
            }
            End::Tail => {
                self.tail = write_packed(&mut self.data, self.tail, element);
            }
        }
        self.count += 1;
    }

    fn pop(&mut self, end: End) -> Option<ListElement> {
        if self.count == 0 {
            return None;
        }
        let element = match end {
            End::Head => {
                let (element, next) = read_forward(&self.data, self.head);
                let element = ListElement::new(element);
                self.head = next;
                element
            }
            End::Tail => {
                let (element, start) = read_backward(&self.data, self.tail);
                let element = ListElement::new(element);
                self.tail = start;
                element
            }
        };
        self.count -= 1;
        Some(element)
    }

    /// The byte position of element `index` (below `count`), walking from
    /// the nearer end.
    fn position(&self, index: usize) -> usize {
        if index <= self.count / 2 {
            let mut at = self.head;
            for _ in 0..index {
                at = read_forward(&self.data, at).1;
            }
            at
        } else {
            let mut end = self.tail;
            for _ in index..self.count {
                end = read_backward(&self.data, end).1;
            }
            end
        }
    }

    fn elements(&self) -> Vec<&[u8]> {
        let mut elements = Vec::with_capacity(self.count);
        let mut at = self.head;
        while at < self.tail {
            let (element, next) = read_forward(&self.data, at);
            elements.push(element);
            at = next;
        }
        elements
    }
}

/// A list value. Never empty while stored: commands delete a list when its last
/// element goes.
///
/// Elements are packed into chunks of up to [`CHUNK_BYTES`] (a short element
/// takes its bytes plus two), so a queue of small items takes a few bytes per
/// item and pushes and pops at either end touch one chunk. Reaching element
/// `i` walks the chunk counts from the nearer end, then the chunk: O(N /
/// chunk) like Redis's quicklist.
#[derive(Clone)]
pub struct ListValue {
    chunks: VecDeque<Chunk>,
    len: usize,
    /// Bytes a listpack holding exactly these elements would take.
    packed_bytes: usize,
    /// Whether Redis would hold this list as a quicklist rather than a listpack.
    quicklist: bool,
}

impl PartialEq for ListValue {
    /// Equal elements in the same encoding, however they are chunked.
    fn eq(&self, other: &ListValue) -> bool {
        self.len == other.len && self.quicklist == other.quicklist && self.iter().eq(other.iter())
    }
}

impl Eq for ListValue {}

impl std::fmt::Debug for ListValue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
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
            chunks: VecDeque::new(),
            len: 0,
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
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

    /// The chunk holding element `index` (below the length) and the
    /// element's index within it, walking from the nearer end.
    fn locate(&self, index: usize) -> (usize, usize) {
        if index < self.len / 2 {
            let mut rest = index;
            for (position, chunk) in self.chunks.iter().enumerate() {
                if rest < chunk.count {
                    return (position, rest);
                }
                rest -= chunk.count;
            }
        } else {
            let mut after = self.len - index;
            for (position, chunk) in self.chunks.iter().enumerate().rev() {
                if after <= chunk.count {
                    return (position, chunk.count - after);
                }
                after -= chunk.count;
            }
        }
        unreachable!("index {index} below length {}", self.len)
    }

    pub fn get(&self, index: usize) -> Option<&[u8]> {
        if index >= self.len {
            return None;
        }
        let (chunk, within) = self.locate(index);
        let chunk = &self.chunks[chunk];
        Some(read_forward(&chunk.data, chunk.position(within)).0)
    }

    /// The elements from head to tail.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            list: self,
            front: (0, self.chunks.front().map_or(0, |chunk| chunk.head)),
            back: self
                .chunks
                .back()
                .map_or((0, 0), |last| (self.chunks.len() - 1, last.tail)),
            remaining: self.len,
        }
    }

    /// The elements from `first` to `last` (inclusive, both in range).
    pub fn range(&self, first: usize, last: usize) -> impl Iterator<Item = &[u8]> {
        let mut iter = self.iter();
        if first < self.len {
            let (chunk, within) = self.locate(first);
            iter.front = (chunk, self.chunks[chunk].position(within));
            iter.remaining = self.len - first;
        }
        iter.take((last + 1).saturating_sub(first))
    }

    /// Redis's check before adding elements of `added_bytes` bytes in total: a
    /// listpack that would grow past 8 KB becomes a quicklist.
    pub fn grow_check(&mut self, added_bytes: usize) {
        if !self.quicklist && self.packed_bytes.saturating_add(added_bytes) > LISTPACK_MAX_BYTES {
            self.quicklist = true;
        }
    }

    /// Redis's check after removing elements: a quicklist that fits half a
    /// listpack becomes a listpack again. Also returns spare capacity.
    pub fn shrink_check(&mut self) {
        if self.quicklist && self.packed_bytes <= LISTPACK_MAX_BYTES / 2 {
            self.quicklist = false;
        }
        let capacity = self.chunks.capacity();
        if capacity > 64 && capacity / 4 > self.chunks.len() {
            self.chunks.shrink_to(self.chunks.len() * 2);
        }
    }

    pub fn push(&mut self, end: End, element: &[u8]) {
        self.packed_bytes += entry_bytes(element);
        self.len += 1;
        let length = packed_len(element.len());
        let chunk = match end {
            End::Head => self.chunks.front_mut(),
            End::Tail => self.chunks.back_mut(),
        };
        match chunk {
            Some(chunk) if chunk.takes(length) => chunk.push(end, element),
            _ => {
                // A list that already fills a chunk is likely to fill the
                // next one too: it gets its whole buffer at once.
                let room = if self.chunks.is_empty() {
                    length
                } else {
                    length.max(CHUNK_BYTES)
                };
                let mut chunk = Chunk::with_room(room, end);
                chunk.push(end, element);
                match end {
                    End::Head => self.chunks.push_front(chunk),
                    End::Tail => self.chunks.push_back(chunk),
                }
            }
        }
    }

    pub fn push_element(&mut self, end: End, element: ListElement) {
        self.push(end, element.as_bytes());
    }

    pub fn pop(&mut self, end: End) -> Option<ListElement> {
        let chunk = match end {
            End::Head => self.chunks.front_mut(),
            End::Tail => self.chunks.back_mut(),
        }?;
        let element = chunk.pop(end)?;
        if chunk.count == 0 {
            match end {
                End::Head => self.chunks.pop_front(),
                End::Tail => self.chunks.pop_back(),
            };
        }
        self.len -= 1;
        self.packed_bytes -= entry_bytes(element.as_bytes());
        Some(element)
    }

    /// Rebuilds chunk `position` with `element` put at its index `within`,
    /// replacing the one there or inserted before it, split into as many
    /// chunks as the elements then need.
    fn rewrite_chunk(&mut self, position: usize, within: usize, element: &[u8], replace: bool) {
        let old = self.chunks[position].clone();
        let mut elements = old.elements();
        if replace {
            elements[within] = element;
        } else {
            elements.insert(within, element);
        }
        let mut rebuilt: Vec<Chunk> = Vec::new();
        for element in elements {
            let length = packed_len(element.len());
            match rebuilt.last_mut() {
                Some(chunk) if chunk.takes(length) => chunk.push(End::Tail, element),
                _ => {
                    let mut chunk = Chunk::with_room(length, End::Tail);
                    chunk.push(End::Tail, element);
                    rebuilt.push(chunk);
                }
            }
        }
        self.chunks.remove(position);
        for (offset, chunk) in rebuilt.into_iter().enumerate() {
            self.chunks.insert(position + offset, chunk);
        }
    }

    /// Replaces the element at `index`; false when there is none.
    pub fn set(&mut self, index: usize, element: &[u8]) -> bool {
        if index >= self.len {
            return false;
        }
        let (position, within) = self.locate(index);
        let chunk = &mut self.chunks[position];
        let at = chunk.position(within);
        let (old, _) = read_forward(&chunk.data, at);
        self.packed_bytes -= entry_bytes(old);
        self.packed_bytes += entry_bytes(element);
        if old.len() == element.len() {
            let start = at + varint_len(old.len());
            chunk.data[start..start + element.len()].copy_from_slice(element);
        } else {
            self.rewrite_chunk(position, within, element, true);
        }
        true
    }

    /// Inserts `element` so that it ends up at `index` (at most the length).
    pub fn insert(&mut self, index: usize, element: &[u8]) {
        let index = index.min(self.len);
        if index == 0 {
            return self.push(End::Head, element);
        }
        if index == self.len {
            return self.push(End::Tail, element);
        }
        let (position, within) = self.locate(index);
        self.packed_bytes += entry_bytes(element);
        self.len += 1;
        self.rewrite_chunk(position, within, element, false);
    }

    /// Removes up to `limit` elements equal to `element` (0: all), scanning
    /// from `from`; returns how many went. One pass over the list.
    pub fn remove_matching(&mut self, element: &[u8], limit: usize, from: End) -> usize {
        let mut removed = 0;
        let mut kept = ListValue::new();
        let mut take = |item: &[u8]| {
            if item == element && (limit == 0 || removed < limit) {
                removed += 1;
            } else {
                match from {
                    End::Head => kept.push(End::Tail, item),
                    End::Tail => kept.push(End::Head, item),
                }
            }
        };
        match from {
            End::Head => self.iter().for_each(&mut take),
            End::Tail => self.iter().rev().for_each(&mut take),
        }
        kept.quicklist = self.quicklist;
        *self = kept;
        removed
    }

    /// Drops `head` elements from the head and `tail` from the tail.
    pub fn trim(&mut self, head: usize, tail: usize) {
        for (count, end) in [(head, End::Head), (tail, End::Tail)] {
            let mut left = count.min(self.len);
            while left > 0 {
                let whole = match end {
                    End::Head => self.chunks.front(),
                    End::Tail => self.chunks.back(),
                }
                .is_some_and(|chunk| chunk.count <= left);
                if !whole {
                    self.pop(end);
                    left -= 1;
                    continue;
                }
                let chunk = match end {
                    End::Head => self.chunks.pop_front(),
                    End::Tail => self.chunks.pop_back(),
                };
                let Some(chunk) = chunk else { break };
                for element in chunk.elements() {
                    self.packed_bytes -= entry_bytes(element);
                }
                self.len -= chunk.count;
                left -= chunk.count;
            }
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

/// The elements of a list in order, from either end.
#[derive(Clone)]
pub struct Iter<'a> {
    list: &'a ListValue,
    /// The chunk and byte position of the next element from the front.
    front: (usize, usize),
    /// The chunk and byte position just after the next element from the back.
    back: (usize, usize),
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let chunks = &self.list.chunks;
        while self.front.1 >= chunks[self.front.0].tail {
            self.front.0 += 1;
            self.front.1 = chunks[self.front.0].head;
        }
        let (element, next) = read_forward(&chunks[self.front.0].data, self.front.1);
        self.front.1 = next;
        self.remaining -= 1;
        Some(element)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let chunks = &self.list.chunks;
        while self.back.1 <= chunks[self.back.0].head {
            self.back.0 -= 1;
            self.back.1 = chunks[self.back.0].tail;
        }
        let (element, start) = read_backward(&chunks[self.back.0].data, self.back.1);
        self.back.1 = start;
        self.remaining -= 1;
        Some(element)
    }
}

impl ExactSizeIterator for Iter<'_> {}

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

/// Bytes an integer takes in a listpack, back-length included.
pub(crate) fn integer_bytes(integer: i64) -> usize {
    let encoded = integer_entry_bytes(integer);
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

pub(crate) fn back_length_bytes(encoded: usize) -> usize {
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

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Draws(u64);

    impl Draws {
        fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % bound as u64) as usize
        }

        fn element(&mut self) -> Vec<u8> {
            let length = match self.below(20) {
                0 => 5000 + self.below(3000),
                1..=3 => 100 + self.below(300),
                _ => self.below(12),
            };
            (0..length).map(|_| b'a' + self.below(3) as u8).collect()
        }
    }

    fn check_against(list: &ListValue, model: &VecDeque<Vec<u8>>, draws: &mut Draws) {
        assert_eq!(list.len(), model.len());
        let packed: usize = model.iter().map(|element| entry_bytes(element)).sum();
        assert_eq!(list.packed_bytes(), LISTPACK_EMPTY_BYTES + packed);
        assert!(list.iter().eq(model.iter().map(Vec::as_slice)));
        assert!(list.iter().rev().eq(model.iter().rev().map(Vec::as_slice)));
        assert_eq!(list.iter().len(), model.len());
        if !model.is_empty() {
            let index = draws.below(model.len());
            assert_eq!(list.get(index), Some(model[index].as_slice()));
            let last = index + draws.below(model.len() - index);
            assert!(list
                .range(index, last)
                .eq(model.range(index..=last).map(Vec::as_slice)));
            // Both ends at once meet in the middle without overlap.
            let mut both = list.iter();
            let (mut front, mut back) = (Vec::new(), Vec::new());
            while let Some(element) = both.next() {
                front.push(element);
                if let Some(element) = both.next_back() {
                    back.push(element);
                }
            }
            front.extend(back.into_iter().rev());
            assert!(front.into_iter().eq(model.iter().map(Vec::as_slice)));
        }
        assert_eq!(list.get(model.len()), None);
    }

    #[test]
    fn chunked_lists_match_a_deque_under_random_changes() {
        for seed in 1..=6u64 {
            let mut draws = Draws(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut list = ListValue::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            for step in 0..4000 {
                match draws.below(12) {
                    0..=2 => {
                        let element = draws.element();
                        list.push(End::Head, &element);
                        model.push_front(element);
                    }
                    3..=5 => {
                        let element = draws.element();
                        list.push(End::Tail, &element);
                        model.push_back(element);
                    }
                    6 => {
                        let popped = list
                            .pop(End::Head)
                            .map(|element| element.as_bytes().to_vec());
                        assert_eq!(popped, model.pop_front());
                    }
                    7 => {
                        let popped = list
                            .pop(End::Tail)
                            .map(|element| element.as_bytes().to_vec());
                        assert_eq!(popped, model.pop_back());
                    }
                    8 if !model.is_empty() => {
                        let index = draws.below(model.len());
                        let element = draws.element();
                        assert!(list.set(index, &element));
                        model[index] = element;
                    }
                    9 => {
                        let index = draws.below(model.len() + 1);
                        let element = draws.element();
                        list.insert(index, &element);
                        model.insert(index, element);
                    }
                    10 if step % 50 == 0 => {
                        let element = draws.element();
                        let limit = draws.below(3);
                        let from = if draws.below(2) == 0 {
                            End::Head
                        } else {
                            End::Tail
                        };
                        let mut removed = 0;
                        let mut kept: VecDeque<Vec<u8>> = VecDeque::new();
                        let matches = |item: &Vec<u8>, removed: &mut usize| {
                            let hit = *item == element && (limit == 0 || *removed < limit);
                            *removed += usize::from(hit);
                            hit
                        };
                        match from {
                            End::Head => {
                                for item in model.drain(..) {
                                    if !matches(&item, &mut removed) {
                                        kept.push_back(item);
                                    }
                                }
                            }
                            End::Tail => {
                                for item in model.drain(..).rev() {
                                    if !matches(&item, &mut removed) {
                                        kept.push_front(item);
                                    }
                                }
                            }
                        }
                        model = kept;
                        assert_eq!(list.remove_matching(&element, limit, from), removed);
                    }
                    11 if step % 40 == 0 => {
                        let head = draws.below(model.len() / 4 + 2);
                        let tail = draws.below(model.len() / 4 + 2);
                        list.trim(head, tail);
                        for _ in 0..head.min(model.len()) {
                            model.pop_front();
                        }
                        for _ in 0..tail.min(model.len()) {
                            model.pop_back();
                        }
                    }
                    _ => {}
                }
                if step % 97 == 0 {
                    check_against(&list, &model, &mut draws);
                }
            }
            check_against(&list, &model, &mut draws);
            let copy = ListValue::from_elements(model.iter().map(Vec::as_slice));
            assert_eq!(copy.iter().len(), list.len());
            assert!(copy.iter().eq(list.iter()), "equal however chunked");
        }
    }

    #[test]
    fn short_elements_take_a_few_bytes_each() {
        let list = ListValue::from_elements((0..100_000).map(|_| &b"xxx"[..]));
        let bytes: usize = list.chunks.iter().map(|chunk| chunk.data.len()).sum();
        assert!(
            bytes <= 100_000 * 6,
            "{bytes} bytes for 100000 elements of 3 bytes"
        );
        let mut pushed = ListValue::new();
        for _ in 0..100_000 {
            pushed.push(End::Head, b"xxx");
        }
        let bytes: usize = pushed.chunks.iter().map(|chunk| chunk.data.len()).sum();
        assert!(
            bytes <= 100_000 * 6,
            "{bytes} bytes for 100000 head pushes of 3 bytes"
        );
    }

    #[test]
    fn trim_and_capacity() {
        let mut list = ListValue::from_elements((0..1000).map(|_| &b"e"[..]));
        list.trim(400, 590);
        assert_eq!(list.len(), 10);
        list.shrink_check();
        assert_eq!(list.packed_bytes(), LISTPACK_EMPTY_BYTES + 10 * 3);
        list.trim(100, 100);
        assert!(list.is_empty());
    }
}
