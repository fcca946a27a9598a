//! The order-statistic tree of a skiplist-encoded sorted set: a B+tree whose
//! inner nodes know how many entries each child holds.
//!
//! Every entry lives in a leaf, a sorted vector of at most [`LEAF_MAX`]
//! entries; an inner node holds up to [`INNER_MAX`] children, with each
//! child's entry count and a lower bound of its entries. A descent by position
//! (insert, remove, rank) binary-searches the bounds, one by rank sums the
//! counts, so a set of a million entries is four levels of contiguous arrays
//! rather than twenty levels of separately allocated binary nodes: updating a
//! member (a removal and an insertion) touches a few cache lines per level.
//!
//! All leaves are at the same depth; every node but the root is at least half
//! full, so insert, remove, rank, select and partition point are O(log N),
//! walking on from any rank in either direction is O(1) amortized per entry,
//! and removing M consecutive ranks is O(log N + M). The shape depends only on
//! the sequence of operations, never on addresses.
//!
//! A bound is a copy of the first entry its child had when the bound was set;
//! it stays a valid bound after that entry goes, so removals never rewrite the
//! ancestors of a leaf.

use crate::zset::Entry;
use std::cmp::Ordering;

/// Most entries in a leaf: 64 entries of 32 bytes are one 2 KiB block.
const LEAF_MAX: usize = 64;

/// Fewest entries in a leaf other than the root.
const LEAF_MIN: usize = LEAF_MAX / 2;

/// Most children of an inner node.
const INNER_MAX: usize = 32;

/// Fewest children of an inner node other than the root.
const INNER_MIN: usize = INNER_MAX / 2;

/// A full leaf that receives an entry first hands some of its entries to a
/// neighbour with at least this much room, and splits only when neither has
/// it. Sets that grow at one end (time-ordered scores) then fill their leaves
/// instead of leaving a trail of half-empty ones.
const SHARE_ROOM_MIN: usize = LEAF_MAX / 8;

/// Entries per leaf in a tree built from sorted entries: nearly full, with
/// room for a few insertions before the first split.
const BUILD_LEAF_FILL: usize = LEAF_MAX - LEAF_MAX / 8;

/// Children per inner node in a tree built from sorted entries.
const BUILD_INNER_FILL: usize = INNER_MAX - INNER_MAX / 4;

// A split leaves two halves of at least the minimum, and a share moves at
// least one entry. A build spreads N items over ceil(N / fill) nodes: with
// three or more, each gets at least (2 fill + 1) / 3 items.
const _: () = assert!(LEAF_MIN >= 1 && 2 * LEAF_MIN <= LEAF_MAX);
const _: () = assert!(INNER_MIN >= 2 && 2 * INNER_MIN <= INNER_MAX);
const _: () = assert!(SHARE_ROOM_MIN >= 2 && SHARE_ROOM_MIN <= LEAF_MAX);
const _: () = assert!(BUILD_LEAF_FILL <= LEAF_MAX && 2 * BUILD_LEAF_FILL + 1 >= 3 * LEAF_MIN);
const _: () = assert!(BUILD_INNER_FILL <= INNER_MAX && 2 * BUILD_INNER_FILL + 1 >= 3 * INNER_MIN);

/// Most inner levels above the leaves. A tree with one more would have at
/// least 2 INNER_MIN^MAX_INNER_LEVELS leaves of LEAF_MIN entries each: more
/// bytes than an address space holds. A walk keeps its path in a fixed array.
const MAX_INNER_LEVELS: usize = 16;
const _: () = assert!(
    2 * (INNER_MIN as u128).pow(MAX_INNER_LEVELS as u32)
        * LEAF_MIN as u128
        * std::mem::size_of::<Entry>() as u128
        > usize::MAX as u128
);

#[derive(Clone)]
enum Node {
    /// Entries in set order.
    Leaf(Vec<Entry>),
    Inner(Box<Inner>),
}

impl Default for Node {
    /// An empty leaf, without an allocation.
    fn default() -> Node {
        Node::Leaf(Vec::new())
    }
}

impl Node {
    /// Entries of a leaf, children of an inner node.
    fn width(&self) -> usize {
        match self {
            Node::Leaf(entries) => entries.len(),
            Node::Inner(inner) => inner.length,
        }
    }

    fn is_underfull(&self) -> bool {
        match self {
            Node::Leaf(entries) => entries.len() < LEAF_MIN,
            Node::Inner(inner) => inner.length < INNER_MIN,
        }
    }
}

/// An inner node. Slots `0..length` of its arrays are in use; the others hold
/// placeholders (an empty entry, 0, an empty leaf), as does `keys[0]`.
#[derive(Clone)]
struct Inner {
    length: usize,
    /// `keys[i]` (for `i >= 1`) is at most every entry of `children[i]` and
    /// above every entry of `children[i - 1]`.
    keys: [Entry; INNER_MAX],
    /// Entries below each child.
    counts: [usize; INNER_MAX],
    children: [Node; INNER_MAX],
}

/// A new right neighbour for a node that split, to go in its parent.
struct Split {
    key: Entry,
    count: usize,
    node: Node,
}

/// The entry in unused key slots: no allocation of its own.
fn placeholder() -> Entry {
    Entry::new(0.0, b"")
}

/// Puts `value` at `position` of the first `length` items, moving the later
/// ones up one (the item at `length` is a placeholder).
fn insert_at<T>(items: &mut [T], length: usize, position: usize, value: T) {
    items[length] = value;
    items[position..=length].rotate_right(1);
}

/// Moves the first `count` of `source`'s `source_length` items to the end of
/// `target`'s `target_length` items, placeholders going the other way.
fn move_front<T>(
    target: &mut [T],
    target_length: usize,
    source: &mut [T],
    source_length: usize,
    count: usize,
) {
    for offset in 0..count {
        std::mem::swap(&mut target[target_length + offset], &mut source[offset]);
    }
    source[..source_length].rotate_left(count);
}

/// Moves the last `count` of `source`'s `source_length` items to the front of
/// `target`'s `target_length` items, placeholders going the other way.
fn move_back<T>(
    source: &mut [T],
    source_length: usize,
    target: &mut [T],
    target_length: usize,
    count: usize,
) {
    target[..target_length + count].rotate_right(count);
    for offset in 0..count {
        std::mem::swap(
            &mut source[source_length - count + offset],
            &mut target[offset],
        );
    }
}

/// Room for `additional` more entries in a leaf, never past [`LEAF_MAX`]: a
/// small tree's one leaf grows by doubling from one entry, so it never holds
/// room for more than twice its entries (as a full-size leaf never does).
fn reserve_leaf(entries: &mut Vec<Entry>, additional: usize) {
    let needed = entries.len() + additional;
    if needed > entries.capacity() {
        let capacity = (entries.capacity() * 2).clamp(1, LEAF_MAX).max(needed);
        entries.reserve_exact(capacity - entries.len());
    }
}

/// Inserts into a leaf with room, in order.
fn insert_sorted(entries: &mut Vec<Entry>, entry: Entry) {
    let position =
        entries.partition_point(|stored| stored.cmp_to(entry.score, entry.member()).is_lt());
    reserve_leaf(entries, 1);
    entries.insert(position, entry);
}

/// Splits a full leaf in two halves and inserts `entry` into the one it
/// belongs to: the bound of the new right half, and that half.
fn split_leaf(entries: &mut Vec<Entry>, entry: Entry) -> (Entry, Vec<Entry>) {
    let mut right = Vec::with_capacity(LEAF_MAX);
    right.extend(entries.drain(LEAF_MAX / 2..));
    if entry.cmp_to(right[0].score, right[0].member()).is_lt() {
        insert_sorted(entries, entry);
    } else {
        insert_sorted(&mut right, entry);
    }
    (right[0].clone(), right)
}

/// What a removal looks for.
#[derive(Clone, Copy)]
enum Target<'a> {
    Rank(usize),
    Position(f64, &'a [u8]),
}

fn remove_from_leaf(entries: &mut Vec<Entry>, target: Target) -> Option<Entry> {
    let index = match target {
        Target::Rank(rank) => rank,
        Target::Position(score, member) => entries
            .binary_search_by(|entry| entry.cmp_to(score, member))
            .ok()?,
    };
    (index < entries.len()).then(|| entries.remove(index))
}

/// Moves a whole subtree's entries, in order, onto `out`.
fn drain_into(node: Node, out: &mut Vec<Entry>) {
    match node {
        Node::Leaf(mut entries) => out.append(&mut entries),
        Node::Inner(mut inner) => {
            for child in &mut inner.children[..inner.length] {
                drain_into(std::mem::take(child), out);
            }
        }
    }
}

impl Inner {
    fn new() -> Box<Inner> {
        Box::new(Inner {
            length: 0,
            keys: std::array::from_fn(|_| placeholder()),
            counts: [0; INNER_MAX],
            children: std::array::from_fn(|_| Node::default()),
        })
    }

    /// The child whose range holds the position (score, member).
    fn child_for(&self, score: f64, member: &[u8]) -> usize {
        self.keys[1..self.length].partition_point(|key| key.cmp_to(score, member).is_le())
    }

    /// The child holding rank `rank` and the rank within it.
    fn child_at(&self, mut rank: usize) -> Option<(usize, usize)> {
        for (index, &count) in self.counts[..self.length].iter().enumerate() {
            if rank < count {
                return Some((index, rank));
            }
            rank -= count;
        }
        None
    }

    fn total(&self) -> usize {
        self.counts[..self.length].iter().sum()
    }

    /// Puts a child in at `position` (at least 1), with room for it.
    fn place(&mut self, position: usize, split: Split) {
        debug_assert!(position >= 1 && self.length < INNER_MAX);
        insert_at(&mut self.keys, self.length, position, split.key);
        insert_at(&mut self.counts, self.length, position, split.count);
        insert_at(&mut self.children, self.length, position, split.node);
        self.length += 1;
    }

    /// Puts a child in at `position` (at least 1); when this node is full it
    /// splits, and its new right half is handed back for the parent.
    fn insert_child(&mut self, position: usize, split: Split) -> Option<Split> {
        if self.length < INNER_MAX {
            self.place(position, split);
            return None;
        }
        let middle = INNER_MAX / 2;
        let mut right = Inner::new();
        let count = self.length - middle;
        move_back(&mut self.keys, self.length, &mut right.keys, 0, count);
        move_back(&mut self.counts, self.length, &mut right.counts, 0, count);
        move_back(
            &mut self.children,
            self.length,
            &mut right.children,
            0,
            count,
        );
        self.length = middle;
        right.length = count;
        if position <= middle {
            self.place(position, split);
        } else {
            right.place(position - middle, split);
        }
        let key = std::mem::replace(&mut right.keys[0], placeholder());
        Some(Split {
            key,
            count: right.total(),
            node: Node::Inner(right),
        })
    }

    /// Drops the child at `position` (at least 1, already emptied).
    fn remove_child(&mut self, position: usize) {
        debug_assert!(position >= 1 && position < self.length);
        let last = self.length - 1;
        self.keys[position..self.length].rotate_left(1);
        self.counts[position..self.length].rotate_left(1);
        self.children[position..self.length].rotate_left(1);
        self.keys[last] = placeholder();
        self.counts[last] = 0;
        self.children[last] = Node::default();
        self.length = last;
    }

    /// Makes room in the full leaf at `index` by moving some of its entries
    /// to a neighbour with room enough; false when neither has it.
    fn share_full_leaf(&mut self, index: usize) -> bool {
        if index > 0 {
            let (head, tail) = self.children.split_at_mut(index);
            if let (Node::Leaf(left), Node::Leaf(full)) = (&mut head[index - 1], &mut tail[0]) {
                let room = LEAF_MAX - left.len();
                if room >= SHARE_ROOM_MIN {
                    let count = room / 2;
                    reserve_leaf(left, count);
                    left.extend(full.drain(..count));
                    self.keys[index] = full[0].clone();
                    self.counts[index - 1] += count;
                    self.counts[index] -= count;
                    return true;
                }
            }
        }
        if index + 1 < self.length {
            let (head, tail) = self.children.split_at_mut(index + 1);
            if let (Node::Leaf(full), Node::Leaf(right)) = (&mut head[index], &mut tail[0]) {
                let room = LEAF_MAX - right.len();
                if room >= SHARE_ROOM_MIN {
                    let count = room / 2;
                    reserve_leaf(right, count);
                    let start = full.len() - count;
                    right.splice(0..0, full.drain(start..));
                    self.keys[index + 1] = right[0].clone();
                    self.counts[index] -= count;
                    self.counts[index + 1] += count;
                    return true;
                }
            }
        }
        false
    }

    /// Restores the fill of the child at `index` (this node has two or more):
    /// merges it with a neighbour when both fit one node, and otherwise shares
    /// their entries (or children) evenly between them. Returns the index of
    /// the first of the pair.
    fn repair(&mut self, index: usize) -> usize {
        debug_assert!(self.length >= 2);
        let left = if index + 1 < self.length {
            index
        } else {
            index - 1
        };
        let right = left + 1;
        let (head, tail) = self.children.split_at_mut(right);
        let merged = match (&mut head[left], &mut tail[0]) {
            (Node::Leaf(first), Node::Leaf(second)) => {
                let total = first.len() + second.len();
                if total <= LEAF_MAX {
                    reserve_leaf(first, second.len());
                    first.append(second);
                    true
                } else {
                    let half = total / 2;
                    if first.len() < half {
                        let count = half - first.len();
                        reserve_leaf(first, count);
                        first.extend(second.drain(..count));
                    } else {
                        let count = first.len() - half;
                        reserve_leaf(second, count);
                        second.splice(0..0, first.drain(half..));
                    }
                    self.keys[right] = second[0].clone();
                    self.counts[left] = first.len();
                    self.counts[right] = second.len();
                    false
                }
            }
            (Node::Inner(first), Node::Inner(second)) => {
                // The parent's bound becomes the bound of `second`'s first
                // child, which may move into `first`.
                second.keys[0] = std::mem::replace(&mut self.keys[right], placeholder());
                let total = first.length + second.length;
                if total <= INNER_MAX {
                    let count = second.length;
                    move_front(
                        &mut first.keys,
                        first.length,
                        &mut second.keys,
                        count,
                        count,
                    );
                    move_front(
                        &mut first.counts,
                        first.length,
                        &mut second.counts,
                        count,
                        count,
                    );
                    move_front(
                        &mut first.children,
                        first.length,
                        &mut second.children,
                        count,
                        count,
                    );
                    first.length += count;
                    second.length = 0;
                    true
                } else {
                    let half = total / 2;
                    if first.length < half {
                        let count = half - first.length;
                        let (at, from) = (first.length, second.length);
                        move_front(&mut first.keys, at, &mut second.keys, from, count);
                        move_front(&mut first.counts, at, &mut second.counts, from, count);
                        move_front(&mut first.children, at, &mut second.children, from, count);
                        first.length += count;
                        second.length -= count;
                    } else {
                        let count = first.length - half;
                        let (from, at) = (first.length, second.length);
                        move_back(&mut first.keys, from, &mut second.keys, at, count);
                        move_back(&mut first.counts, from, &mut second.counts, at, count);
                        move_back(&mut first.children, from, &mut second.children, at, count);
                        first.length -= count;
                        second.length += count;
                    }
                    self.keys[right] = std::mem::replace(&mut second.keys[0], placeholder());
                    self.counts[left] = first.total();
                    self.counts[right] = second.total();
                    false
                }
            }
            _ => unreachable!("siblings at different depths"),
        };
        if merged {
            self.counts[left] += self.counts[right];
            self.counts[right] = 0;
            self.remove_child(right);
        }
        left
    }
}

/// Inserts below an inner node: the node's new right half when it split.
fn insert_below(inner: &mut Inner, entry: Entry) -> Option<Split> {
    let mut index = inner.child_for(entry.score, entry.member());
    if let Node::Inner(child) = &mut inner.children[index] {
        inner.counts[index] += 1;
        let split = insert_below(child, entry)?;
        inner.counts[index] -= split.count;
        return inner.insert_child(index + 1, split);
    }
    if inner.children[index].width() >= LEAF_MAX {
        if inner.share_full_leaf(index) {
            index = inner.child_for(entry.score, entry.member());
        } else {
            let Node::Leaf(entries) = &mut inner.children[index] else {
                unreachable!("a leaf's siblings are leaves");
            };
            let (key, right) = split_leaf(entries, entry);
            inner.counts[index] = entries.len();
            let split = Split {
                key,
                count: right.len(),
                node: Node::Leaf(right),
            };
            return inner.insert_child(index + 1, split);
        }
    }
    let Node::Leaf(entries) = &mut inner.children[index] else {
        unreachable!("a leaf's siblings are leaves");
    };
    insert_sorted(entries, entry);
    inner.counts[index] += 1;
    None
}

/// Removes one entry below an inner node, repairing the child it came from.
fn remove_below(inner: &mut Inner, target: Target) -> Option<Entry> {
    let (index, target) = match target {
        Target::Rank(rank) => {
            let (index, rank) = inner.child_at(rank)?;
            (index, Target::Rank(rank))
        }
        Target::Position(score, member) => (inner.child_for(score, member), target),
    };
    let removed = match &mut inner.children[index] {
        Node::Inner(child) => remove_below(child, target)?,
        Node::Leaf(entries) => remove_from_leaf(entries, target)?,
    };
    inner.counts[index] -= 1;
    if inner.children[index].is_underfull() {
        inner.repair(index);
    }
    Some(removed)
}

/// Removes the entries of ranks `first..end` (within this node, not empty)
/// below an inner node onto `out`, in order, repairing the children left
/// short. The node itself may be left short (or with no children, when the
/// range covered it).
fn remove_range_below(inner: &mut Inner, first: usize, end: usize, out: &mut Vec<Entry>) {
    let mut offset = 0;
    // Children wholly inside the range: a run, dropped after the walk.
    let mut whole = inner.length..inner.length;
    for index in 0..inner.length {
        let count = inner.counts[index];
        let (child_first, child_end) = (offset, offset + count);
        offset = child_end;
        if child_end <= first {
            continue;
        }
        if child_first >= end {
            break;
        }
        let local_first = first.saturating_sub(child_first);
        let local_end = end.min(child_end) - child_first;
        if local_first == 0 && local_end == count {
            drain_into(std::mem::take(&mut inner.children[index]), out);
            inner.counts[index] = 0;
            if whole.is_empty() {
                whole = index..index + 1;
            } else {
                whole.end = index + 1;
            }
            continue;
        }
        match &mut inner.children[index] {
            Node::Leaf(entries) => out.extend(entries.drain(local_first..local_end)),
            Node::Inner(child) => remove_range_below(child, local_first, local_end, out),
        }
        inner.counts[index] -= local_end - local_first;
    }
    if !whole.is_empty() {
        let (start, stop) = (whole.start, whole.end);
        let removed = stop - start;
        inner.keys[start..inner.length].rotate_left(removed);
        inner.counts[start..inner.length].rotate_left(removed);
        inner.children[start..inner.length].rotate_left(removed);
        for index in inner.length - removed..inner.length {
            inner.keys[index] = placeholder();
        }
        inner.length -= removed;
        inner.keys[0] = placeholder();
    }
    settle(inner);
}

/// Repairs every short child of a node with two or more children, then the
/// insides of the children those repairs produced: a range removal can leave
/// a node with one child, which could not repair that child itself, and the
/// short child then meets neighbours only when its parent is merged or shared.
fn settle(inner: &mut Inner) {
    while inner.length > 1 {
        let Some(index) = inner.children[..inner.length]
            .iter()
            .position(Node::is_underfull)
        else {
            return;
        };
        let left = inner.repair(index);
        for index in left..(left + 2).min(inner.length) {
            if let Node::Inner(child) = &mut inner.children[index] {
                settle(child);
            }
        }
    }
}

/// Sizes of `groups` near-equal groups of `count` items, larger ones first.
fn group_sizes(count: usize, groups: usize) -> impl Iterator<Item = usize> {
    (0..groups).map(move |group| count / groups + usize::from(group < count % groups))
}

/// An order-statistic tree of entries in set order (see the module docs).
#[derive(Clone, Default)]
pub struct RankTree {
    root: Node,
    length: usize,
}

impl RankTree {
    /// A tree of `entries` already in set order, in O(N).
    pub fn from_sorted(mut entries: Vec<Entry>) -> RankTree {
        let length = entries.len();
        if length <= LEAF_MAX {
            entries.shrink_to_fit();
            return RankTree {
                root: Node::Leaf(entries),
                length,
            };
        }
        // One level at a time: each node with its count and the bound its
        // parent keeps for it.
        let leaf_count = length.div_ceil(BUILD_LEAF_FILL);
        let mut source = entries.into_iter();
        let mut level: Vec<(Entry, usize, Node)> = group_sizes(length, leaf_count)
            .map(|size| {
                let mut leaf = Vec::with_capacity(LEAF_MAX);
                leaf.extend(source.by_ref().take(size));
                (leaf[0].clone(), size, Node::Leaf(leaf))
            })
            .collect();
        while level.len() > 1 {
            let groups = if level.len() <= INNER_MAX {
                1
            } else {
                level.len().div_ceil(BUILD_INNER_FILL)
            };
            let mut children = std::mem::take(&mut level).into_iter();
            for size in group_sizes(children.len(), groups) {
                let mut inner = Inner::new();
                for (index, (key, count, node)) in children.by_ref().take(size).enumerate() {
                    inner.keys[index] = key;
                    inner.counts[index] = count;
                    inner.children[index] = node;
                }
                inner.length = size;
                let key = std::mem::replace(&mut inner.keys[0], placeholder());
                level.push((key, inner.total(), Node::Inner(inner)));
            }
        }
        let root = level.pop().map(|(_, _, node)| node).unwrap_or_default();
        RankTree { root, length }
    }

    pub fn len(&self) -> usize {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// Adds an entry whose member is not in the tree.
    pub fn insert(&mut self, entry: Entry) {
        self.length += 1;
        let split = match &mut self.root {
            Node::Leaf(entries) if entries.len() < LEAF_MAX => {
                insert_sorted(entries, entry);
                return;
            }
            Node::Leaf(entries) => {
                let (key, right) = split_leaf(entries, entry);
                Split {
                    key,
                    count: right.len(),
                    node: Node::Leaf(right),
                }
            }
            Node::Inner(inner) => match insert_below(inner, entry) {
                Some(split) => split,
                None => return,
            },
        };
        // The root split: a new root above its two halves.
        let mut root = Inner::new();
        root.counts[0] = self.length - split.count;
        root.children[0] = std::mem::take(&mut self.root);
        root.length = 1;
        root.place(1, split);
        self.root = Node::Inner(root);
    }

    /// Removes the entries of ranks `first..end` and returns them in order:
    /// O(log N + M) for M entries.
    pub fn remove_range(&mut self, first: usize, end: usize) -> Vec<Entry> {
        let end = end.min(self.length);
        if first >= end {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(end - first);
        match &mut self.root {
            Node::Leaf(entries) => out.extend(entries.drain(first..end)),
            Node::Inner(inner) => remove_range_below(inner, first, end, &mut out),
        }
        self.length -= out.len();
        self.shrink_root();
        out
    }

    /// Removes and returns the entry at position (score, member).
    pub fn remove_key(&mut self, score: f64, member: &[u8]) -> Option<Entry> {
        self.remove(Target::Position(score, member))
    }

    /// Removes and returns the entry at `rank`.
    pub fn remove_at(&mut self, rank: usize) -> Option<Entry> {
        self.remove(Target::Rank(rank))
    }

    fn remove(&mut self, target: Target) -> Option<Entry> {
        let removed = match &mut self.root {
            Node::Leaf(entries) => remove_from_leaf(entries, target),
            Node::Inner(inner) => remove_below(inner, target),
        }?;
        self.length -= 1;
        self.shrink_root();
        Some(removed)
    }

    /// Replaces a root with one child by that child (or with an empty leaf
    /// when it has none), as often as it takes; a root leaf gives back room
    /// past twice its entries once it uses a quarter or less.
    fn shrink_root(&mut self) {
        while let Node::Inner(inner) = &mut self.root {
            if inner.length > 1 {
                return;
            }
            let child = std::mem::take(&mut inner.children[0]);
            self.root = child;
        }
        if let Node::Leaf(entries) = &mut self.root {
            if entries.capacity() > 4 * entries.len() {
                entries.shrink_to(2 * entries.len());
            }
        }
    }

    pub fn get(&self, mut rank: usize) -> Option<&Entry> {
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(entries) => return entries.get(rank),
                Node::Inner(inner) => {
                    let (index, local) = inner.child_at(rank)?;
                    rank = local;
                    node = &inner.children[index];
                }
            }
        }
    }

    /// The number of leading entries satisfying `before` (a prefix property
    /// of the set order).
    pub fn partition_point(&self, before: impl Fn(&Entry) -> bool) -> usize {
        let mut count = 0;
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(entries) => return count + entries.partition_point(&before),
                Node::Inner(inner) => {
                    // Every entry of the children before the last bound that
                    // satisfies `before` does too; none after it does.
                    let index = inner.keys[1..inner.length].partition_point(&before);
                    count += inner.counts[..index].iter().sum::<usize>();
                    node = &inner.children[index];
                }
            }
        }
    }

    /// The rank the position (score, member) has or would have.
    pub fn rank_of(&self, score: f64, member: &[u8]) -> usize {
        self.partition_point(|entry| entry.cmp_to(score, member) == Ordering::Less)
    }

    /// Entries from `rank` upwards, or downwards to rank 0 when `reverse`
    /// (from the last entry when `rank` is past it).
    pub fn iter_from(&self, rank: usize, reverse: bool) -> TreeIter<'_> {
        let mut iter = TreeIter {
            pending: std::array::from_fn(|_| [].iter()),
            levels: 0,
            leaf: [].iter(),
            reverse,
        };
        let mut rank = match (reverse, self.length.checked_sub(1)) {
            (_, None) => return iter,
            (true, Some(last)) => rank.min(last),
            (false, Some(_)) if rank >= self.length => return iter,
            (false, Some(_)) => rank,
        };
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(entries) => {
                    let rank = rank.min(entries.len());
                    iter.leaf = if reverse {
                        entries[..(rank + 1).min(entries.len())].iter()
                    } else {
                        entries[rank..].iter()
                    };
                    return iter;
                }
                Node::Inner(inner) => {
                    let Some((index, local)) = inner.child_at(rank) else {
                        return iter;
                    };
                    let children = &inner.children[..inner.length];
                    iter.push(if reverse {
                        children[..index].iter()
                    } else {
                        children[index + 1..].iter()
                    });
                    rank = local;
                    node = &children[index];
                }
            }
        }
    }

    /// Checks ordering, bounds, counts, depths and fill (tests).
    #[doc(hidden)]
    pub fn check(&self) -> Result<(), String> {
        let mut previous = None;
        let (count, _) = check_node(&self.root, true, (None, None), &mut previous)?;
        if count != self.length {
            return Err(format!("length {} but {count} entries", self.length));
        }
        Ok(())
    }
}

/// Checks a subtree whose entries must lie in `[lower, upper)`: its entry
/// count and depth.
fn check_node<'a>(
    node: &'a Node,
    is_root: bool,
    (lower, upper): (Option<&Entry>, Option<&Entry>),
    previous: &mut Option<&'a Entry>,
) -> Result<(usize, usize), String> {
    let is_placeholder = |entry: &Entry| entry.score == 0.0 && entry.member().is_empty();
    match node {
        Node::Leaf(entries) => {
            let fewest = if is_root { 0 } else { LEAF_MIN };
            if entries.len() < fewest || entries.len() > LEAF_MAX {
                return Err(format!("leaf of {} entries", entries.len()));
            }
            if entries.capacity() > LEAF_MAX {
                return Err(format!("leaf capacity {}", entries.capacity()));
            }
            for entry in entries {
                if entry.score.is_nan() {
                    return Err("NaN score".into());
                }
                if let Some(before) = previous {
                    if before.cmp_to(entry.score, entry.member()) != Ordering::Less {
                        return Err(format!("out of order: {before:?} {entry:?}"));
                    }
                }
                if lower.is_some_and(|lower| entry.cmp_to(lower.score, lower.member()).is_lt()) {
                    return Err(format!("{entry:?} below its bound {lower:?}"));
                }
                if upper.is_some_and(|upper| entry.cmp_to(upper.score, upper.member()).is_ge()) {
                    return Err(format!("{entry:?} not below the next bound {upper:?}"));
                }
                *previous = Some(entry);
            }
            Ok((entries.len(), 0))
        }
        Node::Inner(inner) => {
            let fewest = if is_root { 2 } else { INNER_MIN };
            if inner.length < fewest || inner.length > INNER_MAX {
                return Err(format!("inner node of {} children", inner.length));
            }
            if !is_placeholder(&inner.keys[0]) {
                return Err("first key is not a placeholder".into());
            }
            for index in inner.length..INNER_MAX {
                let unused = &inner.children[index];
                if !is_placeholder(&inner.keys[index])
                    || inner.counts[index] != 0
                    || !matches!(unused, Node::Leaf(entries) if entries.capacity() == 0)
                {
                    return Err(format!("unused slot {index} holds something"));
                }
            }
            let mut total = 0;
            let mut depth = None;
            for index in 0..inner.length {
                let child_lower = if index == 0 {
                    lower
                } else {
                    Some(&inner.keys[index])
                };
                let child_upper = if index + 1 < inner.length {
                    Some(&inner.keys[index + 1])
                } else {
                    upper
                };
                let (count, child_depth) = check_node(
                    &inner.children[index],
                    false,
                    (child_lower, child_upper),
                    previous,
                )?;
                if count != inner.counts[index] {
                    return Err(format!(
                        "count {} for a child of {count} entries",
                        inner.counts[index]
                    ));
                }
                if *depth.get_or_insert(child_depth) != child_depth {
                    return Err("leaves at different depths".into());
                }
                total += count;
            }
            Ok((total, depth.unwrap_or(0) + 1))
        }
    }
}

/// A walk from a rank in either direction: the rest of the current leaf, and
/// for each inner level on the way down the children not yet entered (in
/// place rather than on the heap: range replies start many short walks).
pub struct TreeIter<'a> {
    pending: [std::slice::Iter<'a, Node>; MAX_INNER_LEVELS],
    /// Levels of `pending` in use.
    levels: usize,
    leaf: std::slice::Iter<'a, Entry>,
    reverse: bool,
}

impl<'a> TreeIter<'a> {
    fn push(&mut self, children: std::slice::Iter<'a, Node>) {
        self.pending[self.levels] = children;
        self.levels += 1;
    }
}

impl<'a> Iterator for TreeIter<'a> {
    type Item = &'a Entry;

    fn next(&mut self) -> Option<&'a Entry> {
        loop {
            let entry = if self.reverse {
                self.leaf.next_back()
            } else {
                self.leaf.next()
            };
            if entry.is_some() {
                return entry;
            }
            // Up to the nearest level with a child left, then down that
            // child's near edge to a leaf.
            let mut node = loop {
                let level = &mut self.pending[self.levels.checked_sub(1)?];
                let next = if self.reverse {
                    level.next_back()
                } else {
                    level.next()
                };
                match next {
                    Some(node) => break node,
                    None => self.levels -= 1,
                }
            };
            loop {
                match node {
                    Node::Leaf(entries) => {
                        self.leaf = entries.iter();
                        break;
                    }
                    Node::Inner(inner) => {
                        let mut children = inner.children[..inner.length].iter();
                        let near = if self.reverse {
                            children.next_back()
                        } else {
                            children.next()
                        };
                        self.push(children);
                        match near {
                            Some(near) => node = near,
                            None => break,
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Levels below the root (0 for a lone leaf), leaves, and the share of
    /// the leaves' room in use.
    fn shape(tree: &RankTree) -> (usize, usize, f64) {
        fn walk(node: &Node, depth: usize, deepest: &mut usize, leaves: &mut usize) {
            match node {
                Node::Leaf(_) => {
                    *deepest = depth;
                    *leaves += 1;
                }
                Node::Inner(inner) => {
                    for child in &inner.children[..inner.length] {
                        walk(child, depth + 1, deepest, leaves);
                    }
                }
            }
        }
        let (mut depth, mut leaves) = (0, 0);
        walk(&tree.root, 0, &mut depth, &mut leaves);
        let fill = tree.len() as f64 / (leaves * LEAF_MAX) as f64;
        (depth, leaves, fill)
    }

    fn position(model: &[Entry], score: f64, member: &[u8]) -> usize {
        model.partition_point(|entry| entry.cmp_to(score, member).is_lt())
    }

    /// Scores from a small set, so that many entries tie on score and the
    /// member decides (signed zeros and infinities included).
    fn random_score(rng: &mut Rng) -> f64 {
        match rng.below(20) {
            0 => f64::NEG_INFINITY,
            1 => f64::INFINITY,
            2 => -0.0,
            _ => rng.below(2_000) as f64 / 4.0 - 100.0,
        }
    }

    /// Unique members, some too long to be stored inline.
    fn member(serial: u64, rng: &mut Rng) -> Vec<u8> {
        let mut member = format!("{:x}", serial.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40);
        member.push_str(&serial.to_string());
        if rng.below(8) == 0 {
            member.push_str(":a-member-long-enough-for-the-heap");
        }
        member.into_bytes()
    }

    fn same(first: Option<&Entry>, second: Option<&Entry>) -> bool {
        first.map(|entry| (entry.score.to_bits(), entry.member()))
            == second.map(|entry| (entry.score.to_bits(), entry.member()))
    }

    /// Tens of thousands of entries over several levels: every operation,
    /// interleaved at random in a growing, a churning and a shrinking phase
    /// (with runs of insertions at either end), agrees with a sorted vector,
    /// and the invariants hold throughout.
    #[test]
    fn large_trees_match_a_sorted_vector() {
        for seed in 0..2 {
            let mut rng = Rng::new(seed);
            let mut serial = 0u64;
            let mut initial: Vec<Entry> = (0..10_000)
                .map(|_| {
                    serial += 1;
                    Entry::new(random_score(&mut rng), &member(serial, &mut rng))
                })
                .collect();
            initial.sort_by(|first, second| first.cmp_to(second.score, second.member()));
            let mut tree = RankTree::from_sorted(initial.clone());
            let mut model = initial;
            tree.check().unwrap();
            let (mut deepest, mut largest) = (0, 0);
            // (most operations, chance in 16 of an insertion) per phase; the
            // last phase ends when the set is small again.
            for (phase, (operations, insert_weight)) in [(50_000, 14), (30_000, 12), (60_000, 3)]
                .into_iter()
                .enumerate()
            {
                for step in 0..operations {
                    if phase == 2 && model.len() < 1_000 {
                        break;
                    }
                    let context = format!("seed {seed} phase {phase} step {step}");
                    step_both(
                        &mut tree,
                        &mut model,
                        &mut rng,
                        &mut serial,
                        insert_weight,
                        &context,
                    );
                    assert_eq!(tree.len(), model.len(), "{context}");
                    largest = largest.max(model.len());
                    if step % 512 == 0 {
                        tree.check()
                            .unwrap_or_else(|error| panic!("{context}: {error}"));
                        deepest = deepest.max(shape(&tree).0);
                    }
                }
                tree.check()
                    .unwrap_or_else(|error| panic!("seed {seed} phase {phase}: {error}"));
                assert!(
                    tree.iter_from(0, false).eq(model.iter()),
                    "seed {seed} phase {phase}"
                );
            }
            // It grew to three levels below the root and shrank back.
            assert!(largest > 30_000, "seed {seed}: at most {largest}");
            assert!(deepest >= 3, "seed {seed}: depth {deepest}");
            assert!(model.len() < 1_000, "seed {seed}: {} left", model.len());
            // Emptying it entirely leaves an empty leaf for a root.
            let length = tree.len();
            assert_eq!(tree.remove_range(0, length + 1).len(), length);
            tree.check().unwrap();
            assert!(tree.is_empty() && matches!(tree.root, Node::Leaf(_)));
            assert_eq!(tree.iter_from(0, true).count(), 0);
        }
    }

    /// One random operation on the tree and the model alike, with the
    /// answers compared: an insertion with chance `insert_weight` in 16.
    fn step_both(
        tree: &mut RankTree,
        model: &mut Vec<Entry>,
        rng: &mut Rng,
        serial: &mut u64,
        insert_weight: u64,
        context: &str,
    ) {
        let length = model.len();
        let rank = rng.below(length as u64 + 2) as usize;
        if rng.below(16) < insert_weight {
            *serial += 1;
            let score = match rng.below(10) {
                // Runs at an end: past the last, or before the first.
                0 => model.last().map_or(0.0, |entry| entry.score) + 1.0,
                1 => model.first().map_or(0.0, |entry| entry.score) - 1.0,
                _ => random_score(rng),
            };
            let entry = Entry::new(score, &member(*serial, rng));
            let at = position(model, entry.score, entry.member());
            model.insert(at, entry.clone());
            tree.insert(entry);
            return;
        }
        match rng.below(9) {
            0 | 1 if rank < length => {
                let (score, key) = (model[rank].score, model[rank].member().to_vec());
                let removed = tree.remove_key(score, &key);
                assert!(
                    same(removed.as_ref(), Some(&model.remove(rank))),
                    "{context}"
                );
            }
            0 | 1 => {
                // Absent: an unknown member, or a known one at another score
                // (no score is an odd eighth).
                let missing = match model.first() {
                    Some(entry) if rng.below(2) == 0 => tree.remove_key(0.125, entry.member()),
                    _ => tree.remove_key(1.0, b"never added"),
                };
                assert!(missing.is_none(), "{context}");
            }
            2 => {
                let removed = tree.remove_at(rank);
                let expected = (rank < length).then(|| model.remove(rank));
                assert!(same(removed.as_ref(), expected.as_ref()), "{context}");
            }
            3 => {
                let span = if rng.below(50) == 0 {
                    rng.below(2_000)
                } else {
                    rng.below(8)
                } as usize;
                let end = rank + span;
                let removed = tree.remove_range(rank, end);
                let expected: Vec<Entry> = if rank < length {
                    model.drain(rank..end.min(length)).collect()
                } else {
                    Vec::new()
                };
                assert_eq!(removed.len(), expected.len(), "{context}");
                for (actual, expected) in removed.iter().zip(&expected) {
                    assert!(same(Some(actual), Some(expected)), "{context}");
                }
            }
            4 => assert!(same(tree.get(rank), model.get(rank)), "{context}"),
            5 => {
                // Present and absent positions alike.
                let (score, key) = match model.get(rank) {
                    Some(entry) if rng.below(2) == 0 => (entry.score, entry.member().to_vec()),
                    _ => (random_score(rng), b"m".to_vec()),
                };
                let expected = position(model, score, &key);
                assert_eq!(tree.rank_of(score, &key), expected, "{context}");
            }
            6 => {
                let threshold = random_score(rng);
                let before = |entry: &Entry| entry.score <= threshold;
                let expected = model.partition_point(before);
                assert_eq!(tree.partition_point(before), expected, "{context}");
            }
            _ => {
                let reverse = rng.below(2) == 0;
                let take = if rng.below(20) == 0 {
                    usize::MAX
                } else {
                    rng.below(200) as usize
                };
                let walked: Vec<&Entry> = tree.iter_from(rank, reverse).take(take).collect();
                let expected: Vec<&Entry> = if reverse {
                    let end = (rank + 1).min(length);
                    model[..end].iter().rev().take(take).collect()
                } else {
                    let rest = model.get(rank..).unwrap_or_default();
                    rest.iter().take(take).collect()
                };
                assert_eq!(walked.len(), expected.len(), "{context}");
                for (actual, expected) in walked.iter().zip(&expected) {
                    assert!(same(Some(actual), Some(expected)), "{context}");
                }
            }
        }
    }

    /// Range removals of every shape (prefixes, suffixes, middles, single
    /// leaves, whole subtrees, all but one entry) from trees of several
    /// levels leave a valid tree of exactly the rest.
    #[test]
    fn range_removals_leave_valid_trees() {
        let mut rng = Rng::new(11);
        for length in [65, 1_000, 5_000, 40_000] {
            let entries: Vec<Entry> = (0..length)
                .map(|index| Entry::new((index / 3) as f64, format!("{index:06}").as_bytes()))
                .collect();
            let built = RankTree::from_sorted(entries.clone());
            built.check().unwrap();
            // The same entries inserted one by one in a scrambled order.
            let mut grown = RankTree::default();
            for index in 0..length {
                grown.insert(entries[(index * 7_919) % length].clone());
            }
            grown.check().unwrap();
            assert!(grown.iter_from(0, false).eq(entries.iter()));
            let mut ranges = vec![
                (0, length),
                (0, length - 1),
                (1, length),
                (length / 2, length / 2 + 1),
            ];
            for _ in 0..30 {
                let first = rng.below(length as u64) as usize;
                let end = first + rng.below((length - first) as u64 + 1) as usize;
                ranges.push((first, end));
            }
            for (first, end) in ranges {
                for source in [&built, &grown] {
                    let mut tree = source.clone();
                    let removed = tree.remove_range(first, end);
                    tree.check()
                        .unwrap_or_else(|error| panic!("{length} {first}..{end}: {error}"));
                    assert!(removed.iter().eq(&entries[first..end]));
                    assert!(tree
                        .iter_from(0, false)
                        .eq(entries[..first].iter().chain(&entries[end..])));
                }
            }
        }
    }

    /// Time-ordered insertions fill the leaves (full leaves hand entries to
    /// the neighbour behind), random ones fill about three quarters, and
    /// both leave the tree shallow.
    #[test]
    fn leaves_stay_well_filled() {
        let mut ascending = RankTree::default();
        let mut descending = RankTree::default();
        for index in 0..100_000 {
            ascending.insert(Entry::new(index as f64, b"m"));
            descending.insert(Entry::new(-(index as f64), b"m"));
        }
        let mut rng = Rng::new(3);
        let mut random = RankTree::default();
        for index in 0..100_000u64 {
            random.insert(Entry::new(rng.below(1 << 40) as f64, &index.to_le_bytes()));
        }
        for (name, tree) in [
            ("ascending", &ascending),
            ("descending", &descending),
            ("random", &random),
        ] {
            tree.check().unwrap();
            let (depth, _, fill) = shape(tree);
            assert!(depth <= 4, "{name}: depth {depth}");
            let least = if name == "random" { 0.7 } else { 0.85 };
            assert!(fill > least, "{name}: fill {fill}");
        }
        assert!(
            RankTree::from_sorted(ascending.iter_from(0, false).cloned().collect())
                .check()
                .is_ok()
        );
    }

    #[test]
    fn trees_built_from_sorted_entries_meet_the_fill_bounds() {
        let entries: Vec<Entry> = (0..60_000)
            .map(|index| Entry::new(index as f64, b"m"))
            .collect();
        let sizes = (0..3_000)
            .chain((3_000..60_000).step_by(997))
            .chain([60_000]);
        for size in sizes {
            let tree = RankTree::from_sorted(entries[..size].to_vec());
            tree.check()
                .unwrap_or_else(|error| panic!("{size} entries: {error}"));
            assert!(tree.iter_from(0, false).eq(&entries[..size]));
        }
    }

    #[test]
    fn small_trees_hold_no_more_than_they_need() {
        let mut tree = RankTree::default();
        tree.insert(Entry::new(1.0, b"a"));
        let Node::Leaf(entries) = &tree.root else {
            panic!("one entry, one leaf");
        };
        assert_eq!(entries.capacity(), 1);
        // A big tree shrunk to a few entries holds room for few more.
        let mut shrunk = RankTree::from_sorted(
            (0..1_000)
                .map(|index| Entry::new(index as f64, b"m"))
                .collect(),
        );
        shrunk.remove_range(0, 990);
        for _ in 0..5 {
            shrunk.remove_at(0);
        }
        let Node::Leaf(rest) = &shrunk.root else {
            panic!("five entries, one leaf");
        };
        assert_eq!(rest.len(), 5);
        assert!(rest.capacity() <= 20, "capacity {}", rest.capacity());
        shrunk.check().unwrap();
        assert_eq!(RankTree::default().iter_from(3, true).count(), 0);
        assert_eq!(tree.iter_from(3, true).count(), 1);
        assert_eq!(tree.iter_from(1, false).count(), 0);
        assert!(tree.remove_key(1.0, b"b").is_none());
        assert!(tree.remove_at(1).is_none());
        assert!(tree.remove_key(1.0, b"a").is_some());
        assert!(tree.is_empty());
        tree.check().unwrap();
    }
}
