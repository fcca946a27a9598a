//! Streams in Redis's RDB forms, so DUMP/RESTORE and MIGRATE move streams
//! between slotraft and Redis.
//!
//! Written as `STREAM_LISTPACKS_2` (Redis 7.0's form, under RDB version 10,
//! which 7.0 and 7.2 load): the stream's listpack nodes as Redis lays them out
//! (master entry, then each entry's flags, ID deltas, fields unless they are
//! the master's, values and lp-count), the counters, and each group with its
//! pending entries and consumers. Two things do not survive the trip, because
//! the form or the value does not hold them: a consumer's active-time (7.0's
//! form has none; Redis 7.2 takes the seen-time for it, and so does this
//! reader), and the contents of entries deleted inside a node, which slotraft
//! does not keep: they are written as deleted entries with the node's last ID
//! and empty values, so a node still holds as many entries as before and its
//! last ID is the same, but its byte size may differ.
//!
//! Read: `STREAM_LISTPACKS` (Redis 5 and 6), `_2` (7.0) and `_3` (7.2), every
//! structure checked (listpack layout, lp-counts, live and deleted counts,
//! ascending IDs, each pending entry owned by exactly one consumer).

use super::{put_length, put_string, BadPayload, Element, Reader};
use crate::stream::{Consumer, Fields, Group, Node, StreamId, StreamValue};
use crate::value::canonical_i64;
use bytes::Bytes;
use std::collections::BTreeMap;

pub(super) const STREAM_LISTPACKS: u8 = 15;
pub(super) const STREAM_LISTPACKS_2: u8 = 19;
pub(super) const STREAM_LISTPACKS_3: u8 = 21;

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;

/// Writes `stream` as a `STREAM_LISTPACKS_2` object, type byte included.
pub(super) fn write(stream: &StreamValue, out: &mut Vec<u8>) {
    write_form(stream, STREAM_LISTPACKS_2, out);
}

/// Writes `stream` in the stream form `form` (the tests read the other two
/// forms Redis writes from here).
fn write_form(stream: &StreamValue, form: u8, out: &mut Vec<u8>) {
    out.push(form);
    put_length(out, stream.node_count() as u64);
    for node in stream.nodes() {
        put_string(out, &raw_id(node.first));
        put_string(out, &node_listpack(stream, node));
    }
    put_length(out, stream.len() as u64);
    put_id(out, stream.last_id);
    if form != STREAM_LISTPACKS {
        put_id(out, stream.first_id());
        put_id(out, stream.max_deleted_id);
        put_length(out, stream.entries_added);
    }
    put_length(out, stream.groups.len() as u64);
    for (name, group) in &stream.groups {
        put_string(out, name);
        put_id(out, group.last_id);
        if form != STREAM_LISTPACKS {
            // Unknown (-1) goes out as Redis writes it: all ones.
            put_length(out, group.entries_read as u64);
        }
        put_length(out, group.pending.len() as u64);
        for (id, pending) in &group.pending {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&pending.delivery_time_ms.to_le_bytes());
            put_length(out, pending.delivery_count);
        }
        put_length(out, group.consumers.len() as u64);
        for (name, consumer) in &group.consumers {
            put_string(out, name);
            out.extend_from_slice(&consumer.seen_time_ms.to_le_bytes());
            if form == STREAM_LISTPACKS_3 {
                let active = consumer.active_time_ms.map_or(-1, |time| time as i64);
                out.extend_from_slice(&active.to_le_bytes());
            }
            put_length(out, consumer.pending.len() as u64);
            for id in &consumer.pending {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

/// Reads a stream object of `type_byte` (one of the three stream forms).
pub(super) fn read(type_byte: u8, reader: &mut Reader<'_>) -> Result<StreamValue, BadPayload> {
    let mut stream = StreamValue::new();
    let nodes = reader.length()?;
    let mut packed_nodes = Vec::new();
    for _ in 0..nodes {
        let key = reader.string()?;
        let master = id_of_raw(&key)?;
        let packed = reader.string()?;
        if type_byte == STREAM_LISTPACKS {
            // Read once the last ID is known (below).
            packed_nodes.push((master, packed));
        } else {
            let (node, entries) = parse_node(master, &packed, None)?.ok_or(BadPayload)?;
            stream.push_node(node, entries).ok_or(BadPayload)?;
        }
    }
    let length = reader.length()?;
    stream.last_id = read_id(reader)?;
    // Before 7.0, XSETID checked the new last ID against the last live
    // entry only, so a stream of that form may hold deleted entries above
    // its last ID. Redis loads it; here those deleted entries are dropped
    // (they hold nothing a command shows), so that every node ends at or
    // below the last ID, as later appends assume.
    for (master, packed) in packed_nodes {
        if let Some((node, entries)) = parse_node(master, &packed, Some(stream.last_id))? {
            stream.push_node(node, entries).ok_or(BadPayload)?;
        }
    }
    if type_byte == STREAM_LISTPACKS {
        // Before 7.0: no counters; Redis starts them from the length.
        stream.entries_added = length;
    } else {
        // The recorded first ID is not checked: Redis derives it (an empty
        // stream loaded from the oldest form records the maximum ID).
        let _first = read_id(reader)?;
        stream.max_deleted_id = read_id(reader)?;
        stream.entries_added = reader.length()?;
    }
    if length != stream.len() as u64
        || stream.entries_added < length
        || stream.nodes().any(|node| node.last > stream.last_id)
    {
        return Err(BadPayload);
    }
    let groups = reader.length()?;
    for _ in 0..groups {
        let name = Bytes::from(reader.string()?);
        let last_id = read_id(reader)?;
        let entries_read = if type_byte == STREAM_LISTPACKS {
            stream.estimate_distance(last_id)
        } else {
            match reader.length()? {
                u64::MAX => crate::stream::ENTRIES_READ_UNKNOWN,
                // Below i64::MAX, so the snapshot form's n + 1 holds it.
                read if read < i64::MAX as u64 => read as i64,
                _ => return Err(BadPayload),
            }
        };
        let mut group = Group::new(last_id, entries_read);
        // The group's pending entries, then the consumers that own them.
        let mut unowned: BTreeMap<StreamId, (u64, u64)> = BTreeMap::new();
        let pending = reader.length()?;
        for _ in 0..pending {
            let id = id_of_raw(reader.take(16)?)?;
            let delivered = read_time(reader)?;
            let count = reader.length()?;
            if unowned.insert(id, (delivered, count)).is_some() {
                return Err(BadPayload);
            }
        }
        let consumers = reader.length()?;
        for _ in 0..consumers {
            let consumer_name = Bytes::from(reader.string()?);
            let seen = read_time(reader)?;
            let active = if type_byte == STREAM_LISTPACKS_3 {
                // -1: never active.
                match reader.take(8)? {
                    [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] => None,
                    bytes => Some(u64::from_le_bytes(
                        bytes.try_into().map_err(|_| BadPayload)?,
                    )),
                }
            } else {
                // Redis 7.2 takes the seen-time; all ones reads as -1, never.
                (seen != u64::MAX).then_some(seen)
            };
            let consumer = Consumer {
                seen_time_ms: seen,
                active_time_ms: active,
                pending: Default::default(),
            };
            if group
                .consumers
                .insert(consumer_name.clone(), consumer)
                .is_some()
            {
                return Err(BadPayload);
            }
            let owned = reader.length()?;
            for _ in 0..owned {
                let id = id_of_raw(reader.take(16)?)?;
                let (delivered, count) = unowned.remove(&id).ok_or(BadPayload)?;
                group.assign(id, &consumer_name, delivered, count);
            }
        }
        if !unowned.is_empty() || stream.groups.insert(name, group).is_some() {
            return Err(BadPayload);
        }
    }
    Ok(stream)
}

/// A node's listpack as Redis's `streamAppendItem` builds it.
fn node_listpack(stream: &StreamValue, node: &Node) -> Vec<u8> {
    let mut packed = Listpack::new();
    let master = node.first;
    let master_fields = &node.master_fields;
    packed.integer(node.live as i64);
    packed.integer(node.total.saturating_sub(node.live) as i64);
    packed.integer(master_fields.len() as i64);
    for field in master_fields.iter() {
        packed.string(field);
    }
    packed.integer(0);
    let deltas = |packed: &mut Listpack, id: StreamId| {
        packed.integer(id.ms.wrapping_sub(master.ms) as i64);
        packed.integer(id.seq.wrapping_sub(master.seq) as i64);
    };
    for (id, fields) in stream.node_entries(node) {
        let pairs = fields.len() / 2;
        let same = pairs == master_fields.len()
            && fields
                .iter()
                .step_by(2)
                .zip(master_fields.iter())
                .all(|(field, master)| field == master);
        packed.integer(if same { FLAG_SAME_FIELDS } else { 0 });
        deltas(&mut packed, id);
        if same {
            for value in fields.iter().skip(1).step_by(2) {
                packed.string(value);
            }
            packed.integer(pairs as i64 + 3);
        } else {
            packed.integer(pairs as i64);
            for data in fields.iter() {
                packed.string(data);
            }
            packed.integer(pairs as i64 * 2 + 4);
        }
    }
    // Entries deleted inside the node: their contents are gone.
    for _ in node.live..node.total {
        packed.integer(FLAG_DELETED | FLAG_SAME_FIELDS);
        deltas(&mut packed, node.last);
        for _ in master_fields.iter() {
            packed.string(b"");
        }
        packed.integer(master_fields.len() as i64 + 3);
    }
    packed.finish()
}

/// A node read from its listpack, with its live entries.
type ParsedNode = (Node, Vec<(StreamId, Fields)>);

/// Parses one node's listpack (`master` is its key's ID): the node and its
/// live entries. With `drop_deleted_above`, deleted entries above that ID
/// are left out (a node of nothing else is `None`); a live entry there is
/// refused.
fn parse_node(
    master: StreamId,
    packed: &[u8],
    drop_deleted_above: Option<StreamId>,
) -> Result<Option<ParsedNode>, BadPayload> {
    // Elements are read as they come: a deleted entry's values are skipped
    // without a copy, and nothing is held per element but what is kept.
    let mut items = super::ListpackElements::new(packed)?;
    fn next<'a>(items: &mut super::ListpackElements<'a>) -> Result<Element<'a>, BadPayload> {
        items.next().ok_or(BadPayload)?
    }
    fn integer(items: &mut super::ListpackElements<'_>) -> Result<i64, BadPayload> {
        match next(items)? {
            Element::Integer(value) => Ok(value),
            Element::Text(text) => canonical_i64(text).ok_or(BadPayload),
        }
    }
    fn bytes(element: Element<'_>) -> Bytes {
        match element {
            Element::Integer(value) => Bytes::from(value.to_string()),
            Element::Text(text) => Bytes::copy_from_slice(text),
        }
    }
    let count = integer(&mut items)?;
    let deleted = integer(&mut items)?;
    let field_count = usize::try_from(integer(&mut items)?).map_err(|_| BadPayload)?;
    if count < 0 || deleted < 0 || field_count > packed.len() {
        return Err(BadPayload);
    }
    let master_fields: Box<[Bytes]> = (0..field_count)
        .map(|_| next(&mut items).map(bytes))
        .collect::<Result<_, _>>()?;
    if integer(&mut items)? != 0 {
        return Err(BadPayload);
    }
    let mut entries = Vec::new();
    let (mut live, mut dead, mut dropped) = (0i64, 0i64, 0i64);
    // The last entry read (IDs ascend) and the last one kept.
    let (mut previous, mut last) = (master, master);
    let mut items = items.peekable();
    while items.peek().is_some() {
        let mut items_ref = PeekedElements(&mut items);
        let flags = items_ref.integer()?;
        if flags & !(FLAG_DELETED | FLAG_SAME_FIELDS) != 0 {
            return Err(BadPayload);
        }
        let id = StreamId::new(
            master.ms.wrapping_add(items_ref.integer()? as u64),
            master.seq.wrapping_add(items_ref.integer()? as u64),
        );
        let same = flags & FLAG_SAME_FIELDS != 0;
        let pairs = if same {
            field_count
        } else {
            usize::try_from(items_ref.integer()?).map_err(|_| BadPayload)?
        };
        if pairs == 0 || pairs > packed.len() {
            return Err(BadPayload);
        }
        let keep = flags & FLAG_DELETED == 0;
        let mut fields = Vec::with_capacity(if keep { pairs * 2 } else { 0 });
        for index in 0..pairs {
            let field = if same { None } else { Some(items_ref.next()?) };
            let value = items_ref.next()?;
            if keep {
                fields.push(match field {
                    Some(field) => bytes(field),
                    None => master_fields[index].clone(),
                });
                fields.push(bytes(value));
            }
        }
        let expected = if same { pairs + 3 } else { pairs * 2 + 4 };
        if items_ref.integer()? != expected as i64 || id < previous {
            return Err(BadPayload);
        }
        previous = id;
        if drop_deleted_above.is_some_and(|limit| id > limit) {
            if keep {
                return Err(BadPayload);
            }
            dropped += 1;
            continue;
        }
        last = id;
        if keep {
            live += 1;
            entries.push((id, fields.into_boxed_slice()));
        } else {
            dead += 1;
        }
    }
    if live != count || dead + dropped != deleted || live + dead + dropped == 0 {
        return Err(BadPayload);
    }
    if live + dead == 0 {
        return Ok(None);
    }
    let node = Node {
        first: master,
        last,
        total: u32::try_from(live + dead).map_err(|_| BadPayload)?,
        live: live as u32,
        // Dropped entries still count here: the node may take fewer
        // appends before `stream-node-max-bytes`, never more.
        bytes: packed.len() as u64,
        master_fields,
    };
    Ok(Some((node, entries)))
}

/// The entries part of a node's listpack, read through a peekable walk.
struct PeekedElements<'p, 'a>(&'p mut std::iter::Peekable<super::ListpackElements<'a>>);

impl<'a> PeekedElements<'_, 'a> {
    fn next(&mut self) -> Result<Element<'a>, BadPayload> {
        self.0.next().ok_or(BadPayload)?
    }

    fn integer(&mut self) -> Result<i64, BadPayload> {
        match self.next()? {
            Element::Integer(value) => Ok(value),
            Element::Text(text) => canonical_i64(text).ok_or(BadPayload),
        }
    }
}

/// A stream ID as Redis keys its radix trees: two big-endian 64-bit numbers.
fn raw_id(id: StreamId) -> [u8; 16] {
    let mut raw = [0u8; 16];
    raw[..8].copy_from_slice(&id.ms.to_be_bytes());
    raw[8..].copy_from_slice(&id.seq.to_be_bytes());
    raw
}

fn id_of_raw(raw: &[u8]) -> Result<StreamId, BadPayload> {
    if raw.len() != 16 {
        return Err(BadPayload);
    }
    let (ms, seq) = raw.split_at(8);
    Ok(StreamId::new(
        u64::from_be_bytes(ms.try_into().map_err(|_| BadPayload)?),
        u64::from_be_bytes(seq.try_into().map_err(|_| BadPayload)?),
    ))
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_length(out, id.ms);
    put_length(out, id.seq);
}

fn read_id(reader: &mut Reader<'_>) -> Result<StreamId, BadPayload> {
    Ok(StreamId::new(reader.length()?, reader.length()?))
}

/// A millisecond time as RDB writes it: eight little-endian bytes.
fn read_time(reader: &mut Reader<'_>) -> Result<u64, BadPayload> {
    Ok(u64::from_le_bytes(
        reader.take(8)?.try_into().map_err(|_| BadPayload)?,
    ))
}

/// A listpack built element by element as Redis's `lpAppend` does: a string
/// that reads as an integer is stored as one.
struct Listpack {
    data: Vec<u8>,
    count: usize,
}

impl Listpack {
    fn new() -> Listpack {
        Listpack {
            data: vec![0; 6],
            count: 0,
        }
    }

    fn integer(&mut self, value: i64) {
        let start = self.data.len();
        match value {
            0..=127 => self.data.push(value as u8),
            -4096..=4095 => {
                let bits = if value < 0 { value + (1 << 13) } else { value } as u16;
                self.data.push(0xC0 | (bits >> 8) as u8);
                self.data.push(bits as u8);
            }
            _ => {
                let (tag, width) = if i16::try_from(value).is_ok() {
                    (0xF1, 2)
                } else if (-(1 << 23)..(1 << 23)).contains(&value) {
                    (0xF2, 3)
                } else if i32::try_from(value).is_ok() {
                    (0xF3, 4)
                } else {
                    (0xF4, 8)
                };
                self.data.push(tag);
                self.data.extend_from_slice(&value.to_le_bytes()[..width]);
            }
        }
        self.back_length(start);
    }

    fn string(&mut self, data: &[u8]) {
        if let Some(value) = canonical_i64(data) {
            return self.integer(value);
        }
        let start = self.data.len();
        let length = data.len();
        if length < 64 {
            self.data.push(0x80 | length as u8);
        } else if length < 4096 {
            self.data.push(0xE0 | (length >> 8) as u8);
            self.data.push(length as u8);
        } else {
            self.data.push(0xF0);
            self.data.extend_from_slice(&(length as u32).to_le_bytes());
        }
        self.data.extend_from_slice(data);
        self.back_length(start);
    }

    /// Ends the element that began at `start` with its back length: its
    /// size in 7-bit groups, most significant first, every group after the
    /// first with the top bit set.
    fn back_length(&mut self, start: usize) {
        let size = self.data.len() - start;
        let groups = crate::list::back_length_bytes(size);
        for group in (0..groups).rev() {
            let bits = ((size >> (7 * group)) & 0x7F) as u8;
            self.data.push(if group + 1 == groups {
                bits
            } else {
                bits | 0x80
            });
        }
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        self.data.push(0xFF);
        let total = self.data.len() as u32;
        self.data[..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(u16::MAX as usize) as u16;
        self.data[4..6].copy_from_slice(&count.to_le_bytes());
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::crc64;
    use crate::value::Value;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
            .collect()
    }

    /// redis-server 7.0's DUMP of a stream: XADD st 1-1 a 1 b x, 1-2 a 2 b y,
    /// 2-0 c 300, 3-5 a -7 b ""; XDEL st 1-2; group g from 0 read by alice
    /// (2 entries) and bob (1), 1-1 acknowledged; group h from $ with an
    /// idle consumer carol.
    const WITH_DELETION: &str = "13011000000000000000010000000000000001404d4d0000001f000301010102018161028162020001020100010001010181780205010301000101010201817902050100010101dfff020101816302c12c020601020102010401dff90280010501ff03030501010102040201670305040200000000000000020000000000000000418a7922a201000001000000000000000300000000000000054a8a7922a2010000010205616c696365418a7922a2010000010000000000000002000000000000000003626f624a8a7922a201000001000000000000000300000000000000050168030581ffffffffffffffff0001056361726f6c658a7922a2010000000a00d81aa95b039dd6e1";

    /// redis-server 7.0's DUMP of a stream with no deletion (its listpack
    /// LZF-compressed): XADD sx 5-1 name ann age 31, 5-2 name bob age
    /// 99999999999, 7-0 other <70 v> n -4096, 7-1 name "" age -32769; group g
    /// from 0 (ENTRIESREAD 0) read by c1 (2 entries); idle consumer c2.
    const NO_DELETION: &str = "13011000000000000000050000000000000001c3406d40b016b00000002100040100010201846e616d65058361676504400e000020010783616e6e041f0105201d0e0001010183626f6204f4ffe776481720370109052014100201dfff020201856f7468657206e04676e03c000748816e02d0000208205e4079098001f2ff7fff040501ff0407010501000004010167050202020000000000000005000000000000000146b17922a2010000010000000000000005000000000000000246b17922a2010000010202633146b17922a20100000200000000000000050000000000000001000000000000000500000000000000020263324db17922a2010000000a00b09a4c0e43189849";

    fn stream_of(payload: &[u8]) -> StreamValue {
        match super::super::restore(payload) {
            Ok(Value::Stream(stream)) => *stream,
            other => panic!("not a stream: {other:?}"),
        }
    }

    /// Each node's key and listpack (decompressed), and every byte after
    /// the nodes.
    type Parts = (Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>);

    /// A DUMP payload's stream object, in [`Parts`].
    fn parts(payload: &[u8]) -> Parts {
        assert_eq!(payload[0], STREAM_LISTPACKS_2);
        let mut reader = Reader {
            data: &payload[1..payload.len() - 10],
        };
        let count = reader.length().unwrap();
        let nodes = (0..count)
            .map(|_| (reader.string().unwrap(), reader.string().unwrap()))
            .collect();
        (nodes, reader.data.to_vec())
    }

    fn entries(stream: &StreamValue) -> Vec<(String, Vec<String>)> {
        stream
            .range(StreamId::ZERO, StreamId::MAX, 0, false)
            .into_iter()
            .map(|(id, fields)| {
                let fields = fields
                    .iter()
                    .map(|data| String::from_utf8_lossy(data).into_owned())
                    .collect();
                (id.to_string(), fields)
            })
            .collect()
    }

    #[test]
    fn a_redis_stream_is_written_back_byte_for_byte() {
        let redis = hex(NO_DELETION);
        let stream = stream_of(&redis);
        let ours = super::super::dump(&Value::Stream(Box::new(stream.clone())));
        assert_eq!(parts(&ours), parts(&redis));
        // The node's size as slotraft counts it when appending is the size
        // of the listpack Redis wrote.
        let node = stream.nodes().next().unwrap();
        assert_eq!(node.bytes, parts(&redis).0[0].1.len() as u64);
        let mut rebuilt = StreamValue::new();
        for (id, fields) in stream.range(StreamId::ZERO, StreamId::MAX, 0, false) {
            rebuilt.append(id, fields.clone());
        }
        assert_eq!(
            rebuilt.nodes().collect::<Vec<_>>(),
            stream.nodes().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_redis_stream_with_a_deletion_and_groups_reads_as_redis_shows_it() {
        let stream = stream_of(&hex(WITH_DELETION));
        let pairs = |items: &[&str]| items.iter().map(|item| item.to_string()).collect();
        assert_eq!(
            entries(&stream),
            vec![
                ("1-1".to_string(), pairs(&["a", "1", "b", "x"])),
                ("2-0".to_string(), pairs(&["c", "300"])),
                ("3-5".to_string(), pairs(&["a", "-7", "b", ""])),
            ]
        );
        assert_eq!(stream.last_id, StreamId::new(3, 5));
        assert_eq!(stream.max_deleted_id, StreamId::new(1, 2));
        assert_eq!(stream.entries_added, 4);
        let node = stream.nodes().next().unwrap();
        assert_eq!(
            (node.first, node.last, node.total, node.live),
            (StreamId::new(1, 1), StreamId::new(3, 5), 4, 3)
        );
        let g = &stream.groups[&Bytes::from_static(b"g")];
        assert_eq!((g.last_id, g.entries_read), (StreamId::new(3, 5), 4));
        let pending: Vec<_> = g
            .pending
            .iter()
            .map(|(id, p)| {
                (
                    id.to_string(),
                    p.consumer.clone(),
                    p.delivery_time_ms,
                    p.delivery_count,
                )
            })
            .collect();
        assert_eq!(
            pending,
            vec![
                (
                    "2-0".to_string(),
                    Bytes::from_static(b"alice"),
                    1_795_874_720_321,
                    1
                ),
                (
                    "3-5".to_string(),
                    Bytes::from_static(b"bob"),
                    1_795_874_720_330,
                    1
                ),
            ]
        );
        let alice = &g.consumers[&Bytes::from_static(b"alice")];
        assert_eq!(alice.seen_time_ms, 1_795_874_720_321);
        assert_eq!(alice.active_time_ms, Some(1_795_874_720_321));
        assert_eq!(
            alice.pending.iter().copied().collect::<Vec<_>>(),
            vec![StreamId::new(2, 0)]
        );
        let h = &stream.groups[&Bytes::from_static(b"h")];
        assert_eq!(h.entries_read, crate::stream::ENTRIES_READ_UNKNOWN);
        assert!(h.pending.is_empty());
        assert_eq!(
            h.consumers[&Bytes::from_static(b"carol")].seen_time_ms,
            1_795_874_720_357
        );
        // Written back and read again: the same stream, the deleted entry
        // kept as a deleted entry of the node.
        let again = stream_of(&super::super::dump(&Value::Stream(Box::new(
            stream.clone(),
        ))));
        assert_eq!(entries(&again), entries(&stream));
        let node_again = again.nodes().next().unwrap();
        assert_eq!(
            (
                node_again.first,
                node_again.last,
                node_again.total,
                node_again.live
            ),
            (node.first, node.last, node.total, node.live)
        );
        assert_eq!(again.groups, stream.groups);
        assert_eq!(
            (again.last_id, again.max_deleted_id, again.entries_added),
            (stream.last_id, stream.max_deleted_id, stream.entries_added)
        );
    }

    /// Many nodes, deletions that empty a node and leave holes in others,
    /// fields of every width: what slotraft writes it reads back whole.
    #[test]
    fn streams_round_trip() {
        let mut stream = StreamValue::new();
        for index in 0..450u64 {
            let id = StreamId::new(1_000 + index / 3, index % 3);
            let value = match index % 5 {
                0 => index.to_string(),
                1 => format!("-{}", index * 1_000_003),
                2 => "w".repeat(index as usize % 90),
                3 => "z".repeat(5_000),
                _ => String::new(),
            };
            let fields: Fields = if index % 7 == 0 {
                vec![Bytes::from("other"), Bytes::from(value)].into()
            } else {
                vec![
                    Bytes::from("f"),
                    Bytes::from(value),
                    Bytes::from("12"),
                    Bytes::from("x"),
                ]
                .into()
            };
            stream.append(id, fields);
        }
        let ids: Vec<StreamId> = stream
            .range(StreamId::ZERO, StreamId::MAX, 0, false)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        for (index, id) in ids.iter().enumerate() {
            if index % 4 == 1 || (100..210).contains(&index) {
                assert!(stream.delete(*id));
            }
        }
        let mut group = Group::new(ids[300], 250);
        group.consumers.insert(Bytes::from("a"), Consumer::new(5));
        group.consumers.insert(Bytes::from("b"), Consumer::new(6));
        group.assign(ids[10], &Bytes::from("a"), 100, 2);
        group.assign(ids[20], &Bytes::from("b"), 200, 1);
        group.assign(ids[30], &Bytes::from("a"), 300, 7);
        for consumer in group.consumers.values_mut() {
            consumer.active_time_ms = Some(consumer.seen_time_ms);
        }
        stream.groups.insert(Bytes::from("grp"), group);
        stream
            .groups
            .insert(Bytes::from("new"), Group::new(StreamId::ZERO, -1));
        let payload = super::super::dump(&Value::Stream(Box::new(stream.clone())));
        let back = stream_of(&payload);
        assert_eq!(entries(&back), entries(&stream));
        assert_eq!(back.groups, stream.groups);
        assert_eq!(back.node_count(), stream.node_count());
        for (ours, theirs) in back.nodes().zip(stream.nodes()) {
            assert_eq!(
                (
                    ours.first,
                    ours.last,
                    ours.total,
                    ours.live,
                    &ours.master_fields
                ),
                (
                    theirs.first,
                    theirs.last,
                    theirs.total,
                    theirs.live,
                    &theirs.master_fields
                )
            );
            if theirs.total == theirs.live {
                assert_eq!(ours.bytes, theirs.bytes, "node at {}", theirs.first);
            }
        }
        assert_eq!(
            (back.last_id, back.max_deleted_id, back.entries_added),
            (stream.last_id, stream.max_deleted_id, stream.entries_added)
        );
    }

    /// The forms of Redis 5-6 and 7.2 read back with what they hold: 7.2's
    /// keeps active-times; the older one has no counters, so they come out
    /// as Redis derives them (entries added = length, no deleted maximum,
    /// entries read estimated).
    #[test]
    fn the_older_and_newer_stream_forms_are_read() {
        let mut stream = stream_of(&hex(WITH_DELETION));
        let carol = Bytes::from_static(b"carol");
        let h = stream.groups.get_mut(&Bytes::from_static(b"h")).unwrap();
        h.consumers.get_mut(&carol).unwrap().active_time_ms = None;
        let sealed = |form: u8, version: u16| {
            let mut payload = Vec::new();
            write_form(&stream, form, &mut payload);
            payload.extend_from_slice(&version.to_le_bytes());
            let checksum = crc64(0, &payload);
            payload.extend_from_slice(&checksum.to_le_bytes());
            payload
        };
        let newest = stream_of(&sealed(STREAM_LISTPACKS_3, 11));
        assert_eq!(newest.groups, stream.groups);
        assert_eq!(entries(&newest), entries(&stream));
        let oldest = stream_of(&sealed(STREAM_LISTPACKS, 9));
        assert_eq!(entries(&oldest), entries(&stream));
        assert_eq!(oldest.entries_added, 3);
        assert_eq!(oldest.max_deleted_id, StreamId::ZERO);
        assert_eq!(oldest.last_id, stream.last_id);
        let g = &oldest.groups[&Bytes::from_static(b"g")];
        assert_eq!(g.entries_read, 3);
        assert_eq!(g.pending, stream.groups[&Bytes::from_static(b"g")].pending);
        let carol_then = &oldest.groups[&Bytes::from_static(b"h")].consumers[&carol];
        assert_eq!(carol_then.active_time_ms, Some(carol_then.seen_time_ms));
    }

    /// Redis before 7.0 could leave deleted entries above a stream's last
    /// ID (XDEL of the last entry, then XSETID below it). That form loads:
    /// the deleted entries are dropped, and the next entry appends after
    /// the last ID.
    #[test]
    fn an_old_stream_with_deleted_entries_above_its_last_id_loads() {
        let pair = |value: &'static [u8]| -> Fields {
            vec![Bytes::from_static(b"f"), Bytes::from_static(value)].into_boxed_slice()
        };
        let mut stream = StreamValue::new();
        for (seq, value) in [(1, b"a"), (2, b"b"), (3, b"c")] {
            stream.append(StreamId::new(5, seq), pair(value));
        }
        assert!(stream.delete(StreamId::new(5, 3)));
        stream.last_id = StreamId::new(5, 2);
        let sealed = |stream: &StreamValue, form: u8| {
            let mut payload = Vec::new();
            write_form(stream, form, &mut payload);
            payload.extend_from_slice(&9u16.to_le_bytes());
            let checksum = crc64(0, &payload);
            payload.extend_from_slice(&checksum.to_le_bytes());
            payload
        };
        let mut loaded = stream_of(&sealed(&stream, STREAM_LISTPACKS));
        assert_eq!(loaded.last_id, StreamId::new(5, 2));
        let node = loaded.nodes().next().unwrap();
        assert_eq!(
            (node.last, node.total, node.live),
            (StreamId::new(5, 2), 2, 2)
        );
        loaded.append(StreamId::new(5, 3), pair(b"new"));
        assert_eq!(
            entries(&loaded),
            vec![
                ("5-1".to_string(), vec!["f".to_string(), "a".to_string()]),
                ("5-2".to_string(), vec!["f".to_string(), "b".to_string()]),
                ("5-3".to_string(), vec!["f".to_string(), "new".to_string()]),
            ]
        );
        // The 7.x forms record the deleted maximum: there it stays refused.
        assert!(super::super::restore(&sealed(&stream, STREAM_LISTPACKS_2)).is_err());
        // A live entry above the last ID is refused in every form.
        let mut live_above = StreamValue::new();
        live_above.append(StreamId::new(5, 1), pair(b"a"));
        live_above.append(StreamId::new(5, 2), pair(b"b"));
        live_above.last_id = StreamId::new(5, 1);
        assert!(super::super::restore(&sealed(&live_above, STREAM_LISTPACKS)).is_err());
    }

    /// Every single-byte change of a stream payload (checksum fixed up) is
    /// either read or refused, never a panic.
    #[test]
    fn damaged_stream_payloads_are_refused_without_panicking() {
        let payload = hex(WITH_DELETION);
        let body_end = payload.len() - 8;
        for at in 0..body_end - 2 {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut damaged = payload[..body_end].to_vec();
                damaged[at] ^= flip;
                let checksum = crc64(0, &damaged);
                damaged.extend_from_slice(&checksum.to_le_bytes());
                let _ = super::super::restore(&damaged);
            }
        }
        for length in 0..body_end - 2 {
            let mut cut = payload[..length].to_vec();
            cut.extend_from_slice(&payload[body_end - 2..body_end]);
            let checksum = crc64(0, &cut);
            cut.extend_from_slice(&checksum.to_le_bytes());
            assert!(super::super::restore(&cut).is_err(), "cut at {length}");
        }
    }
}

#[cfg(test)]
mod edge_tests {
    use super::*;
    use crate::dump::crc64;
    use crate::value::Value;

    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut payload = body.to_vec();
        payload.extend_from_slice(&10u16.to_le_bytes());
        let checksum = crc64(0, &payload);
        payload.extend_from_slice(&checksum.to_le_bytes());
        payload
    }

    /// Values Redis can hold that sit at the edges of slotraft's own form:
    /// an empty stream recording the maximum first ID, a node of more than
    /// 100 entries, entries-read at i64::MAX, a seen-time of all ones. Each
    /// restores and survives slotraft's snapshot form.
    #[test]
    fn edge_values_restore_and_survive_the_snapshot_form() {
        // Empty stream, first ID recorded as the maximum, one group.
        let mut body = vec![STREAM_LISTPACKS_2, 0, 0, 5, 0];
        put_id(&mut body, StreamId::MAX);
        body.extend_from_slice(&[0, 0, 3, 1]);
        put_string(&mut body, b"g");
        body.extend_from_slice(&[0, 0]);
        put_length(&mut body, i64::MAX as u64 - 1);
        body.extend_from_slice(&[0, 1]);
        put_string(&mut body, b"c");
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        body.push(0);
        let Ok(Value::Stream(empty)) = super::super::restore(&sealed(&body)) else {
            panic!("the empty stream restores");
        };
        let group = &empty.groups[&Bytes::from_static(b"g")];
        assert_eq!(group.entries_read, i64::MAX - 1);
        assert_eq!(
            group.consumers[&Bytes::from_static(b"c")].active_time_ms,
            None
        );
        let value = Value::Stream(empty);
        let own = crate::dump::encode_body(&value);
        assert_eq!(crate::dump::decode_body(&own), Ok(value));
        // One node of 150 entries (a larger stream-node-max-entries).
        let mut big = StreamValue::new();
        for index in 1..=150u64 {
            big.append(
                StreamId::new(index, 0),
                vec![Bytes::from("f"), Bytes::from("v")].into(),
            );
        }
        let mut payload = Vec::new();
        let node = big.nodes().next().unwrap().clone();
        let mut wide = Node {
            last: StreamId::new(150, 0),
            total: 150,
            live: 150,
            ..node
        };
        wide.bytes = 0;
        let mut one = StreamValue::new();
        let entries: Vec<_> = big
            .range(StreamId::ZERO, StreamId::MAX, 0, false)
            .into_iter()
            .map(|(id, fields)| (id, fields.clone()))
            .collect();
        one.push_node(wide, entries).unwrap();
        one.last_id = StreamId::new(150, 0);
        one.entries_added = 150;
        write(&one, &mut payload);
        let Ok(Value::Stream(back)) = super::super::restore(&sealed(&payload)) else {
            panic!("the wide node restores");
        };
        assert_eq!(back.nodes().next().unwrap().total, 150);
        let value = Value::Stream(back);
        let own = crate::dump::encode_body(&value);
        assert_eq!(crate::dump::decode_body(&own), Ok(value));
    }
}
