//! The stream value (Redis 7.2 streams): entries ordered by ID, each a list of
//! field/value pairs, with the stream's counters (last generated ID,
//! entries added, maximum deleted ID) and its consumer groups (pending
//! entries lists, consumers).
//!
//! Entries live in an ordered map. Redis keeps them in listpack nodes of at
//! most `stream-node-max-entries` (100) entries, and one thing is observable
//! about those nodes: approximate trimming (`MAXLEN ~`, `MINID ~`) only removes
//! whole nodes, and XINFO STREAM reports their count (`radix-tree-keys`). So
//! the value also keeps the node boundaries Redis would have ([`Node`]): an
//! entry is appended to the last node until that node has held 100 entries
//! (deleted ones included) or its listpack, counted byte for byte as Redis
//! lays it out (master entry, flags, ID deltas, fields unless they are the
//! master's, lp-count), would reach 4096 bytes with the new entry's fields
//! and values; XDEL of a node's last live entry drops the node, exact
//! trimming marks entries deleted inside a node.
//!
//! Everything here is ordered (BTreeMap), so the value and every reply built
//! from it are a function of the history alone.

use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Redis's `stream-node-max-entries` default.
pub const NODE_MAX_ENTRIES: u32 = 100;

/// Redis's `stream-node-max-bytes` default: a node whose listpack would
/// reach this many bytes with the new entry's fields and values is closed.
pub const NODE_MAX_BYTES: u64 = 4096;

/// A group's `entries-read` when it is not known (Redis's
/// `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID, or None after the maximum.
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, or None before 0-0.
    pub fn previous(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::ZERO
    }

    /// `<ms>-<seq>` as reply bytes.
    pub fn to_bytes(self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}-{}", self.ms, self.seq)
    }
}

/// One of Redis's listpack nodes, as far as it is observable: the first and
/// last ID it ever held, how many entries it held in all and how many of them
/// are still live, its listpack's size and its master entry's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub first: StreamId,
    pub last: StreamId,
    pub total: u32,
    pub live: u32,
    pub bytes: u64,
    pub master_fields: Box<[Bytes]>,
}

/// Bytes an entry appended to a node with `master` ID and `master_fields`
/// adds to its listpack (Redis's `streamAppendItem` layout).
fn appended_bytes(
    master: StreamId,
    master_fields: &[Bytes],
    id: StreamId,
    fields: &[Bytes],
) -> u64 {
    use crate::list::{entry_bytes, integer_bytes};
    let pairs = fields.len() / 2;
    let same = pairs == master_fields.len()
        && fields
            .iter()
            .step_by(2)
            .zip(master_fields)
            .all(|(field, master)| field == master);
    let mut bytes = integer_bytes(if same { 2 } else { 0 })
        + integer_bytes(id.ms.wrapping_sub(master.ms) as i64)
        + integer_bytes(id.seq.wrapping_sub(master.seq) as i64);
    if !same {
        bytes += integer_bytes(pairs as i64);
    }
    for pair in fields.chunks(2) {
        if !same {
            bytes += entry_bytes(&pair[0]);
        }
        bytes += entry_bytes(&pair[1]);
    }
    let lp_count = if same { pairs + 3 } else { pairs * 2 + 4 };
    bytes += integer_bytes(lp_count as i64);
    bytes as u64
}

/// A pending entry of a group (Redis's NACK).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub consumer: Bytes,
    pub delivery_time_ms: u64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumer {
    /// Last time the consumer tried an interaction (`seen-time`).
    pub seen_time_ms: u64,
    /// Last successful interaction (`active-time`); None before the first.
    pub active_time_ms: Option<u64>,
    /// The IDs it has pending (the group's PEL holds the details).
    pub pending: BTreeSet<StreamId>,
}

impl Consumer {
    pub fn new(now_ms: u64) -> Consumer {
        Consumer {
            seen_time_ms: now_ms,
            active_time_ms: None,
            pending: BTreeSet::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical entries read, or [`ENTRIES_READ_UNKNOWN`].
    pub entries_read: i64,
    pub pending: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pending: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Removes a pending entry from the group and its consumer.
    pub fn remove_pending(&mut self, id: StreamId) -> bool {
        match self.pending.remove(&id) {
            Some(pending) => {
                if let Some(consumer) = self.consumers.get_mut(&pending.consumer) {
                    consumer.pending.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives a pending entry (existing or new) to `consumer`, which must exist.
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, delivery_time_ms: u64, count: u64) {
        if let Some(old) = self.pending.get(&id) {
            if old.consumer != *consumer {
                let previous = old.consumer.clone();
                if let Some(owner) = self.consumers.get_mut(&previous) {
                    owner.pending.remove(&id);
                }
            }
        }
        // The consumer's stored name, shared: the argument may be a view of
        // a whole request buffer.
        let consumer = self.consumers.get_key_value(consumer).map_or_else(
            || Bytes::copy_from_slice(consumer),
            |(name, _)| name.clone(),
        );
        self.pending.insert(
            id,
            Pending {
                consumer: consumer.clone(),
                delivery_time_ms,
                delivery_count: count,
            },
        );
        if let Some(owner) = self.consumers.get_mut(&consumer) {
            owner.pending.insert(id);
        }
    }
}

/// Fields and values of an entry, interleaved.
pub type Fields = Box<[Bytes]>;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamValue {
    entries: BTreeMap<StreamId, Fields>,
    nodes: VecDeque<Node>,
    pub last_id: StreamId,
    pub entries_added: u64,
    pub max_deleted_id: StreamId,
    pub groups: BTreeMap<Bytes, Group>,
}

/// Why an append failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the last one.
    TooSmall,
}

/// How XADD names the new entry's ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewId {
    /// `*`: from the clock.
    Auto,
    /// `<ms>-*`.
    Ms(u64),
    /// `<ms>-<seq>`.
    Exact(StreamId),
}

/// A trimming request (XADD's or XTRIM's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    pub strategy: TrimStrategy,
    pub approximate: bool,
    /// Most entries removed (approximate only; 0: no limit).
    pub limit: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    MaxLen(u64),
    MinId(StreamId),
}

impl StreamValue {
    pub fn new() -> StreamValue {
        StreamValue::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    /// The first live entry's ID, or 0-0 (Redis's `first_id`).
    pub fn first_id(&self) -> StreamId {
        self.entries
            .keys()
            .next()
            .copied()
            .unwrap_or(StreamId::ZERO)
    }

    /// The last live entry's ID, or 0-0 (Redis's `streamLastValidID`).
    pub fn last_valid_id(&self) -> StreamId {
        self.entries
            .keys()
            .next_back()
            .copied()
            .unwrap_or(StreamId::ZERO)
    }

    pub fn get(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.entries.contains_key(&id)
    }

    pub fn first_entry(&self) -> Option<(StreamId, &Fields)> {
        self.entries.iter().next().map(|(id, fields)| (*id, fields))
    }

    pub fn last_entry(&self) -> Option<(StreamId, &Fields)> {
        self.entries
            .iter()
            .next_back()
            .map(|(id, fields)| (*id, fields))
    }

    /// Entries with `start <= id <= end`, ascending (or descending with
    /// `reverse`), at most `count` of them (0: all).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: usize,
        reverse: bool,
    ) -> Vec<(StreamId, &Fields)> {
        if start > end {
            return Vec::new();
        }
        let limit = if count == 0 { usize::MAX } else { count };
        let range = self.entries.range(start..=end);
        if reverse {
            range
                .rev()
                .take(limit)
                .map(|(id, fields)| (*id, fields))
                .collect()
        } else {
            range
                .take(limit)
                .map(|(id, fields)| (*id, fields))
                .collect()
        }
    }

    /// The ID an append with `requested` would get at `now_ms`.
    pub fn next_id(&self, requested: NewId, now_ms: u64) -> Result<StreamId, AppendError> {
        let id = match requested {
            NewId::Auto => {
                if self.last_id.ms < now_ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.next().ok_or(AppendError::TooSmall)?
                }
            }
            NewId::Ms(ms) => {
                if ms == self.last_id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AppendError::TooSmall);
                    }
                    StreamId::new(ms, self.last_id.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            NewId::Exact(id) => id,
        };
        if id <= self.last_id {
            return Err(AppendError::TooSmall);
        }
        Ok(id)
    }

    /// Appends an entry with `id` (greater than the last ID).
    pub fn append(&mut self, id: StreamId, fields: Fields) {
        debug_assert!(id > self.last_id);
        let data_bytes: u64 = fields.iter().map(|data| data.len() as u64).sum();
        match self.nodes.back_mut() {
            Some(node)
                if node.total < NODE_MAX_ENTRIES
                    && node.bytes.saturating_add(data_bytes) < NODE_MAX_BYTES =>
            {
                node.bytes += appended_bytes(node.first, &node.master_fields, id, &fields);
                node.total += 1;
                node.live += 1;
                node.last = id;
            }
            _ => {
                use crate::list::{entry_bytes, integer_bytes};
                let master_fields: Box<[Bytes]> = fields.iter().step_by(2).cloned().collect();
                // Header and end byte, live and deleted counts, the field
                // count, the fields and the master entry's terminator.
                let master_bytes = 7
                    + integer_bytes(1)
                    + integer_bytes(0)
                    + integer_bytes(master_fields.len() as i64)
                    + master_fields
                        .iter()
                        .map(|field| entry_bytes(field))
                        .sum::<usize>()
                    + integer_bytes(0);
                let bytes = master_bytes as u64 + appended_bytes(id, &master_fields, id, &fields);
                self.nodes.push_back(Node {
                    first: id,
                    last: id,
                    total: 1,
                    live: 1,
                    bytes,
                    master_fields,
                });
            }
        }
        self.entries.insert(id, fields);
        self.last_id = id;
        self.entries_added = self.entries_added.saturating_add(1);
    }

    /// The index of the node holding `id`.
    fn node_of(&self, id: StreamId) -> Option<usize> {
        let after = self.nodes.partition_point(|node| node.first <= id);
        let index = after.checked_sub(1)?;
        (self.nodes[index].last >= id).then_some(index)
    }

    /// XDEL of one ID: true when it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        if let Some(index) = self.node_of(id) {
            let node = &mut self.nodes[index];
            if node.live <= 1 {
                self.nodes.remove(index);
            } else {
                node.live -= 1;
            }
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        true
    }

    /// Trims as Redis's `streamTrim` does; the number of entries removed.
    pub fn trim(&mut self, trim: Trim) -> u64 {
        let mut deleted: u64 = 0;
        while let Some(node) = self.nodes.front().cloned() {
            if let TrimStrategy::MaxLen(max) = trim.strategy {
                if self.entries.len() as u64 <= max {
                    break;
                }
            }
            let live = node.live as u64;
            if trim.limit != 0 && deleted + live > trim.limit {
                break;
            }
            let remove_node = match trim.strategy {
                TrimStrategy::MaxLen(max) => self.entries.len() as u64 - live >= max,
                TrimStrategy::MinId(min) => node.last < min,
            };
            if remove_node {
                self.nodes.pop_front();
                let ids: Vec<StreamId> = self
                    .entries
                    .range(node.first..=node.last)
                    .map(|(id, _)| *id)
                    .collect();
                for id in ids {
                    self.entries.remove(&id);
                }
                deleted += live;
                continue;
            }
            if trim.approximate {
                break;
            }
            // Entries inside this node, marked deleted one by one.
            let mut removed: u32 = 0;
            while let Some((&id, _)) = self.entries.range(node.first..=node.last).next() {
                let stop = match trim.strategy {
                    TrimStrategy::MaxLen(max) => self.entries.len() as u64 <= max,
                    TrimStrategy::MinId(min) => id >= min,
                };
                if stop {
                    break;
                }
                self.entries.remove(&id);
                removed += 1;
            }
            if let Some(front) = self.nodes.front_mut() {
                front.live -= removed;
            }
            deleted += removed as u64;
            break;
        }
        deleted
    }

    /// Redis's `streamEstimateDistanceFromFirstEverEntry`: the logical
    /// counter of `id`, or [`ENTRIES_READ_UNKNOWN`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = i64::try_from(self.entries_added).unwrap_or(i64::MAX);
        if self.entries_added == 0 {
            return 0;
        }
        let length = self.entries.len() as i64;
        if length == 0 && id <= self.last_id {
            return added;
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return added,
            std::cmp::Ordering::Greater => return ENTRIES_READ_UNKNOWN,
            std::cmp::Ordering::Less => {}
        }
        let first = self.first_id();
        if self.max_deleted_id.is_zero() || self.max_deleted_id < first {
            match id.cmp(&first) {
                std::cmp::Ordering::Less => return added - length,
                std::cmp::Ordering::Equal => return added - length + 1,
                std::cmp::Ordering::Greater => {}
            }
        }
        ENTRIES_READ_UNKNOWN
    }

    /// Redis's `streamRangeHasTombstones` from `start` to the end.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id() > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// A group's lag (XINFO), or None when it cannot be computed.
    pub fn lag(&self, group: &Group) -> Option<i64> {
        let added = i64::try_from(self.entries_added).unwrap_or(i64::MAX);
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(group.last_id) {
            return Some(added - group.entries_read);
        }
        let read = self.estimate_distance(group.last_id);
        (read != ENTRIES_READ_UNKNOWN).then(|| added - read)
    }

    /// Advances a group past `id`, delivered by XREADGROUP `>`.
    pub fn advance_group(&self, group: &mut Group, id: StreamId) {
        if id <= group.last_id {
            return;
        }
        if group.entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(id) {
            group.entries_read = group.entries_read.saturating_add(1);
        } else if self.entries_added != 0 {
            group.entries_read = self.estimate_distance(id);
        }
        group.last_id = id;
    }

    /// The live entries of `node`, ascending.
    pub(crate) fn node_entries<'s>(
        &'s self,
        node: &Node,
    ) -> impl Iterator<Item = (StreamId, &'s Fields)> + 's {
        self.entries
            .range(node.first..=node.last)
            .map(|(id, fields)| (*id, fields))
    }

    /// Appends a node read from a payload, with its live entries (ascending,
    /// inside the node, after every entry held so far, each with fields and
    /// values in pairs). None when anything is out of place; a node with no
    /// live entry is left out, as Redis drops such a node.
    pub(crate) fn push_node(&mut self, node: Node, entries: Vec<(StreamId, Fields)>) -> Option<()> {
        if node.first > node.last
            || node.live as usize != entries.len()
            || node.live > node.total
            || self
                .nodes
                .back()
                .is_some_and(|last| node.first <= last.last)
        {
            return None;
        }
        for (id, fields) in entries {
            if id < node.first
                || id > node.last
                || fields.is_empty()
                || !fields.len().is_multiple_of(2)
                || self
                    .entries
                    .keys()
                    .next_back()
                    .is_some_and(|last| id <= *last)
            {
                return None;
            }
            self.entries.insert(id, fields);
        }
        if node.live > 0 {
            self.nodes.push_back(node);
        }
        Some(())
    }

    // ---- Serialization (DUMP body, snapshots, digest) ---------------------------

    /// Appends the serialized stream (after the type byte) to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_id(out, self.last_id);
        put(out, self.entries_added);
        put_id(out, self.max_deleted_id);
        put(out, self.nodes.len() as u64);
        for node in &self.nodes {
            put_id(out, node.first);
            put_id(out, node.last);
            put(out, node.total as u64);
            put(out, node.live as u64);
            put(out, node.bytes);
            put(out, node.master_fields.len() as u64);
            for field in node.master_fields.iter() {
                put_bytes(out, field);
            }
            for (id, fields) in self.entries.range(node.first..=node.last) {
                put_id(out, *id);
                put(out, fields.len() as u64 / 2);
                for data in fields.iter() {
                    put_bytes(out, data);
                }
            }
        }
        put(out, self.groups.len() as u64);
        for (name, group) in &self.groups {
            put_bytes(out, name);
            put_id(out, group.last_id);
            // -1 (unknown) as 0, n as n + 1.
            put(out, (group.entries_read as u64).wrapping_add(1));
            put(out, group.consumers.len() as u64);
            for (name, consumer) in &group.consumers {
                put_bytes(out, name);
                put(out, consumer.seen_time_ms);
                put(out, consumer.active_time_ms.map_or(0, |time| time + 1));
            }
            put(out, group.pending.len() as u64);
            for (id, pending) in &group.pending {
                put_id(out, *id);
                put_bytes(out, &pending.consumer);
                put(out, pending.delivery_time_ms);
                put(out, pending.delivery_count);
            }
        }
    }

    /// Reads what [`encode`](Self::encode) wrote, checking every invariant;
    /// None for anything inconsistent. Counts are never trusted for
    /// allocations beyond the bytes present.
    pub(crate) fn decode(reader: &mut crate::dump::Reader<'_>) -> Option<StreamValue> {
        let mut stream = StreamValue {
            last_id: get_id(reader)?,
            entries_added: reader.u64().ok()?,
            max_deleted_id: get_id(reader)?,
            ..StreamValue::default()
        };
        let node_count = reader.u64().ok()?;
        let mut previous: Option<StreamId> = None;
        for _ in 0..node_count {
            let first = get_id(reader)?;
            let last = get_id(reader)?;
            let total = u32::try_from(reader.u64().ok()?).ok()?;
            let live = u32::try_from(reader.u64().ok()?).ok()?;
            let bytes = reader.u64().ok()?;
            let field_count = reader.u64().ok()?;
            if field_count > reader.remaining() as u64 {
                return None;
            }
            let master_fields = (0..field_count)
                .map(|_| get_bytes(reader))
                .collect::<Option<Box<[Bytes]>>>()?;
            let node = Node {
                first,
                last,
                total,
                live,
                bytes,
                master_fields,
            };
            if node.first > node.last
                || node.total == 0
                || node.live > node.total
                || previous.is_some_and(|last| node.first <= last)
                || node.last > stream.last_id
            {
                return None;
            }
            previous = Some(node.last);
            for _ in 0..node.live {
                let id = get_id(reader)?;
                if id < node.first
                    || id > node.last
                    || stream
                        .entries
                        .keys()
                        .next_back()
                        .is_some_and(|last| id <= *last)
                {
                    return None;
                }
                let pairs = reader.u64().ok()?;
                if pairs == 0 || pairs > reader.remaining() as u64 / 2 {
                    return None;
                }
                let mut fields = Vec::with_capacity(pairs as usize * 2);
                for _ in 0..pairs * 2 {
                    fields.push(get_bytes(reader)?);
                }
                stream.entries.insert(id, fields.into_boxed_slice());
            }
            stream.nodes.push_back(node);
        }
        if (stream.entries.len() as u64) > stream.entries_added {
            return None;
        }
        let group_count = reader.u64().ok()?;
        for _ in 0..group_count {
            let name = get_bytes(reader)?;
            let last_id = get_id(reader)?;
            let entries_read = reader.u64().ok()?.wrapping_sub(1) as i64;
            if entries_read < ENTRIES_READ_UNKNOWN {
                return None;
            }
            let mut group = Group::new(last_id, entries_read);
            let consumers = reader.u64().ok()?;
            for _ in 0..consumers {
                let name = get_bytes(reader)?;
                let seen_time_ms = reader.u64().ok()?;
                let active = reader.u64().ok()?;
                let consumer = Consumer {
                    seen_time_ms,
                    active_time_ms: active.checked_sub(1),
                    pending: BTreeSet::new(),
                };
                if group.consumers.insert(name, consumer).is_some() {
                    return None;
                }
            }
            let pending_count = reader.u64().ok()?;
            for _ in 0..pending_count {
                let id = get_id(reader)?;
                let consumer = get_bytes(reader)?;
                let delivery_time_ms = reader.u64().ok()?;
                let delivery_count = reader.u64().ok()?;
                let owner = group.consumers.get_mut(&consumer)?;
                if !owner.pending.insert(id) {
                    return None;
                }
                let pending = Pending {
                    consumer,
                    delivery_time_ms,
                    delivery_count,
                };
                if group.pending.insert(id, pending).is_some() {
                    return None;
                }
            }
            if stream.groups.insert(name, group).is_some() {
                return None;
            }
        }
        Some(stream)
    }
}

fn put(out: &mut Vec<u8>, value: u64) {
    crate::dump::put_length(out, value);
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put(out, id.ms);
    put(out, id.seq);
}

fn put_bytes(out: &mut Vec<u8>, data: &[u8]) {
    put(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn get_id(reader: &mut crate::dump::Reader<'_>) -> Option<StreamId> {
    Some(StreamId::new(reader.u64().ok()?, reader.u64().ok()?))
}

fn get_bytes(reader: &mut crate::dump::Reader<'_>) -> Option<Bytes> {
    let length = reader.length().ok()?;
    Some(Bytes::copy_from_slice(reader.take(length).ok()?))
}

/// Parses a stream ID as Redis's `streamGenericParseIDOrReply` does.
/// `missing_seq` fills an ID given as milliseconds only; `strict` refuses
/// `-` and `+`; `allow_star` accepts `<ms>-*` (XADD), reported as
/// `Ok((id, false))` with seq 0.
pub fn parse_id(
    argument: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_star: bool,
) -> Option<(StreamId, bool)> {
    if argument.len() > 127 {
        return None;
    }
    // C string semantics: the text ends at a NUL byte.
    let text = match argument.iter().position(|&byte| byte == 0) {
        Some(end) => &argument[..end],
        None => argument,
    };
    if text == b"-" || text == b"+" {
        if strict {
            return None;
        }
        let id = if text == b"-" {
            StreamId::ZERO
        } else {
            StreamId::MAX
        };
        return Some((id, true));
    }
    let (ms_text, seq_text) = match text.iter().position(|&byte| byte == b'-') {
        Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
        None => (text, None),
    };
    let ms = string_to_u64(ms_text)?;
    match seq_text {
        None => Some((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if allow_star => Some((StreamId::new(ms, 0), false)),
        Some(seq) => Some((StreamId::new(ms, string_to_u64(seq)?), true)),
    }
}

/// Redis's `string2ull`: a canonical non-negative `long long`, or what C's
/// `strtoull` accepts as the whole string (leading spaces, a sign, leading
/// zeros; a `-` negates modulo 2^64).
fn string_to_u64(text: &[u8]) -> Option<u64> {
    if let Some(value) = crate::value::canonical_i64(text) {
        return u64::try_from(value).ok();
    }
    let mut rest = text;
    while let Some((&byte, tail)) = rest.split_first() {
        if matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
            rest = tail;
        } else {
            break;
        }
    }
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in rest {
        value = value.checked_mul(10)?.checked_add((digit - b'0') as u64)?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        vec![Bytes::from_static(b"f"), Bytes::from_static(b"v")].into_boxed_slice()
    }

    #[test]
    fn ids_parse_as_redis() {
        assert_eq!(
            parse_id(b"1-2", 0, true, false),
            Some((StreamId::new(1, 2), true))
        );
        assert_eq!(
            parse_id(b"5", 7, true, false),
            Some((StreamId::new(5, 7), true))
        );
        assert_eq!(parse_id(b"-", 0, true, false), None);
        assert_eq!(parse_id(b"+", 0, false, false), Some((StreamId::MAX, true)));
        assert_eq!(
            parse_id(b"5-*", 0, true, true),
            Some((StreamId::new(5, 0), false))
        );
        assert_eq!(parse_id(b"5-*", 0, true, false), None);
        assert_eq!(parse_id(b"-5", 0, false, false), None);
        assert_eq!(parse_id(b"a", 0, false, false), None);
        assert_eq!(
            parse_id(b"007", 0, true, false),
            Some((StreamId::new(7, 0), true))
        );
        assert_eq!(
            parse_id(b"18446744073709551615-18446744073709551615", 0, true, false),
            Some((StreamId::MAX, true))
        );
        assert_eq!(parse_id(b"18446744073709551616", 0, true, false), None);
        assert_eq!(parse_id(b"", 0, false, false), None);
    }

    #[test]
    fn nodes_follow_redis_and_approximate_trim_removes_whole_nodes() {
        let mut stream = StreamValue::new();
        for ms in 1..=250 {
            stream.append(StreamId::new(ms, 0), fields());
        }
        assert_eq!(stream.node_count(), 3);
        let trim = Trim {
            strategy: TrimStrategy::MaxLen(120),
            approximate: true,
            limit: 10_000,
        };
        assert_eq!(stream.trim(trim), 100);
        assert_eq!(stream.len(), 150);
        // Exact trimming marks entries inside the first node.
        let exact = Trim {
            approximate: false,
            limit: 0,
            ..trim
        };
        assert_eq!(stream.trim(exact), 30);
        assert_eq!(stream.node_count(), 2);
        assert_eq!(stream.first_id(), StreamId::new(131, 0));
        // Deleting a node's every live entry drops the node.
        for ms in 131..=200 {
            assert!(stream.delete(StreamId::new(ms, 0)));
        }
        assert_eq!(stream.node_count(), 1);
        assert_eq!(stream.max_deleted_id, StreamId::new(200, 0));
    }

    #[test]
    fn encoding_round_trips() {
        let mut stream = StreamValue::new();
        for ms in 1..=150 {
            stream.append(StreamId::new(ms, 1), fields());
        }
        stream.delete(StreamId::new(3, 1));
        let mut group = Group::new(StreamId::new(10, 1), 9);
        group
            .consumers
            .insert(Bytes::from_static(b"alice"), Consumer::new(5));
        group.assign(StreamId::new(4, 1), &Bytes::from_static(b"alice"), 7, 2);
        stream.groups.insert(Bytes::from_static(b"g"), group);
        let mut out = Vec::new();
        stream.encode(&mut out);
        let mut reader = crate::dump::Reader { data: &out };
        let decoded = StreamValue::decode(&mut reader).expect("decodes");
        assert!(reader.data.is_empty());
        assert_eq!(decoded, stream);
    }
}
