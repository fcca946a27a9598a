//! The snapshot format: the whole replicated state of a keyspace, streamed entry by
//! entry through a writer and verified as it is read back.
//!
//! ```text
//! "SLRFSNAP"                          magic, 8 bytes
//! version                             u32 LE (2; 1 is still read)
//! flags                               u8, version 2 only (bit 0: the databases
//!                                     keep a per-slot key index; bit 1: slot
//!                                     states follow; bit 2: scripts follow;
//!                                     other bits 0)
//! slot states, only with flag bit 1:
//!     state count                     varint (1 to 16384)
//!     per state, in slot order:
//!         slot                        u16 LE (below 16384, strictly increasing)
//!         state                       u8 (1 frozen, 2 gone)
//! scripts, only with flag bit 2:
//!     script count                    varint
//!     per script, in SHA1 order:      SHA1 hex, body (each varint length + bytes)
//!     library count                   varint
//!     per library, in name order:     name, code (each varint length + bytes)
//! database count                      varint (at least 1)
//! per database, in index order:
//!     db index                        varint (0, 1, 2, ... in sequence)
//!     hash key                        2 x u64 LE (the key table's SipHash key)
//!     key table buckets               varint
//!     expiry table buckets            varint
//!     active-expiry cursor            u64 LE
//!     key count                       varint
//!     per key, in table order:
//!         key                         varint length + bytes
//!         expire_at_ms                u64 LE (0 = no TTL)
//!         encoding                    u8 (strings: 0 int, 1 embstr, 2 raw;
//!                                     lists: 3 listpack, 4 quicklist;
//!                                     hashes: 3 listpack, 6 hashtable;
//!                                     sets: 7 intset, 3 listpack,
//!                                     6 hashtable)
//!                                     sorted sets: 20 listpack, 21 skiplist;
//!                                     streams: 22)
//!         value                       varint length + the DUMP body (dump.rs:
//!                                     type byte + serialized value)
//! end marker                          0xFF
//! CRC-64                              u64 LE, dump.rs's crc64 of every byte before
//! ```
//!
//! Varints are unsigned LEB128 in their shortest form, as in DUMP payloads.
//!
//! **What is in it:** everything the replicated state machine's behaviour depends
//! on. Every key of every database with its value and TTL, keys whose TTL has
//! passed but that are not deleted yet included (expiry is decided by log time,
//! so they are state). The value's encoding, since OBJECT ENCODING shows it and
//! DUMP's body alone re-encodes strings. And each database's table layout: hash
//! key (SWAPDB moves databases, seeds included), bucket counts (they depend on
//! history, not only on the key count) and active-expiry cursor, with keys in
//! table order, so a loaded keyspace has the very same tables: SCAN cursors,
//! RANDOMKEY picks and which keys an active-expiry entry reclaims come out as on
//! the replicas that applied the log.
//!
//! The slots' migration states (frozen, gone), since they decide replies.
//!
//! **What is not:** access data (LRU/LFU; loaded keys start at 0) and statistics
//! (hits, misses, dirty, expired keys): they are replica-local.
//!
//! Reading verifies the checksum incrementally and refuses a bad magic, an
//! unknown version, truncation, trailing bytes, a checksum mismatch and any
//! inconsistent content, without panicking. A length is never trusted for an
//! allocation: buffers grow only as the data arrives.

use crate::db::{Db, DbLayout};
use crate::dump::{self, crc64};
use crate::set::SetEncoding;
use crate::value::{StringValue, Value, EMBSTR_MAX_BYTES};
use crate::{Keyspace, KeyspaceConfig, ScriptStore, SlotState};
use bytes::Bytes;
use cluster::SLOTS;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// The first bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"SLRFSNAP";

/// The format version [`write_snapshot`] writes. [`read_snapshot`] reads it and
/// every older version down to [`OLDEST_FORMAT_VERSION`].
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version [`read_snapshot`] reads. Version 1 has no flags
/// byte (a keyspace without a slot index).
pub const OLDEST_FORMAT_VERSION: u32 = 1;

/// Flags byte: the databases keep a per-slot key index.
const FLAG_SLOT_INDEX: u8 = 1 << 0;

/// Flags byte: slot states follow the flags. Written only when some slot has a
/// state, so a keyspace without any writes the same bytes as before states
/// existed (and a reader that predates them refuses a snapshot that has some).
const FLAG_SLOT_STATES: u8 = 1 << 1;
/// Flags byte: cached scripts and function libraries follow the slot states.
/// Written only when there are any, so other snapshots keep their bytes.
const FLAG_SCRIPTS: u8 = 1 << 2;
/// Most bytes of one script body or library's code in a snapshot.
const MAX_SCRIPT_BYTES: u64 = 1 << 32;

/// The byte of each slot state.
const STATE_FROZEN: u8 = 1;
const STATE_GONE: u8 = 2;

/// Follows the last database.
const END_MARKER: u8 = 0xFF;

/// Encoding bytes, one per encoding of every type.
mod encoding {
    pub const INT: u8 = 0;
    pub const EMBSTR: u8 = 1;
    pub const RAW: u8 = 2;
    pub const LISTPACK: u8 = 3;
    pub const QUICKLIST: u8 = 4;
    pub const HASHTABLE: u8 = 6;
    pub const INTSET: u8 = 7;
    /// Sorted sets (numbered apart from the other types' encodings).
    pub const ZSET_LISTPACK: u8 = 20;
    pub const ZSET_SKIPLIST: u8 = 21;
    /// Streams (one encoding; the body carries their node layout).
    pub const STREAM: u8 = 22;
}

/// Most databases a snapshot may hold.
const MAX_DATABASES: u64 = 1 << 20;
/// Longest key accepted.
const MAX_KEY_BYTES: u64 = 1 << 32;
/// Longest serialized value accepted.
const MAX_VALUE_BYTES: u64 = 1 << 40;

/// Writes and reads go through a buffer of this size.
const BUFFER_BYTES: usize = 64 * 1024;
/// A scratch buffer grown past this by one large value is released after it.
const SCRATCH_KEEP_BYTES: usize = 1024 * 1024;

/// Why a snapshot could not be read.
#[derive(Debug)]
pub enum SnapshotError {
    /// The reader failed.
    Io(io::Error),
    /// The data is not a valid snapshot: bad magic, truncated, trailing bytes,
    /// checksum mismatch or inconsistent content.
    Corrupt(String),
    /// A snapshot of a format version this build does not read.
    UnsupportedVersion(u32),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Io(error) => write!(formatter, "snapshot read failed: {error}"),
            SnapshotError::Corrupt(what) => write!(formatter, "corrupt snapshot: {what}"),
            SnapshotError::UnsupportedVersion(version) => write!(
                formatter,
                "unsupported snapshot format version {version} (this build reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
            ),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io(error) => Some(error),
            SnapshotError::Corrupt(_) | SnapshotError::UnsupportedVersion(_) => None,
        }
    }
}

impl From<io::Error> for SnapshotError {
    fn from(error: io::Error) -> Self {
        SnapshotError::Io(error)
    }
}

fn corrupt(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(what.into())
}

// ---- Writing -------------------------------------------------------------------

/// Writes `keyspace` as a snapshot to `out`, entry by entry (through a small
/// buffer; nothing proportional to the keyspace is built in memory), and flushes
/// `out`.
pub fn write_snapshot(keyspace: &Keyspace, out: &mut impl Write) -> io::Result<()> {
    let mut writer = SnapshotWriter {
        out,
        buffer: Vec::with_capacity(BUFFER_BYTES),
        crc: 0,
    };
    writer.put(MAGIC)?;
    writer.put(&FORMAT_VERSION.to_le_bytes())?;
    let mut flags = 0;
    if keyspace.has_slot_index() {
        flags |= FLAG_SLOT_INDEX;
    }
    let slot_states = keyspace.slot_states();
    if !slot_states.is_empty() {
        flags |= FLAG_SLOT_STATES;
    }
    if !keyspace.scripts.is_empty() {
        flags |= FLAG_SCRIPTS;
    }
    writer.put(&[flags])?;
    if !slot_states.is_empty() {
        writer.varint(slot_states.len() as u64)?;
        for (&slot, &state) in slot_states {
            let byte = match state {
                SlotState::Frozen => STATE_FROZEN,
                SlotState::Gone => STATE_GONE,
            };
            writer.put(&slot.to_le_bytes())?;
            writer.put(&[byte])?;
        }
    }
    if !keyspace.scripts.is_empty() {
        for map in [&keyspace.scripts.scripts, &keyspace.scripts.libraries] {
            writer.varint(map.len() as u64)?;
            for (name, code) in map {
                for part in [name, code] {
                    writer.varint(part.len() as u64)?;
                    writer.put(part)?;
                }
            }
        }
    }
    writer.varint(keyspace.dbs().len() as u64)?;
    let mut body = Vec::new();
    for (index, db) in keyspace.dbs().iter().enumerate() {
        let (hash_key_0, hash_key_1) = db.hash_key();
        let layout = db.layout();
        writer.varint(index as u64)?;
        writer.put(&hash_key_0.to_le_bytes())?;
        writer.put(&hash_key_1.to_le_bytes())?;
        writer.varint(layout.key_buckets)?;
        writer.varint(layout.expire_buckets)?;
        writer.put(&layout.expire_cursor.to_le_bytes())?;
        writer.varint(db.len() as u64)?;
        for (key, entry) in db.entries() {
            writer.varint(key.len() as u64)?;
            writer.put(key)?;
            writer.put(&entry.expire_at_ms().unwrap_or(0).to_le_bytes())?;
            writer.put(&[encoding_of(&entry.value)])?;
            body.clear();
            dump::encode_body_into(&mut body, &entry.value);
            writer.varint(body.len() as u64)?;
            writer.put(&body)?;
            if body.capacity() > SCRATCH_KEEP_BYTES {
                body = Vec::new();
            }
        }
    }
    writer.put(&[END_MARKER])?;
    let crc = writer.crc;
    writer.put_unchecked(&crc.to_le_bytes())?;
    writer.flush_buffer()?;
    writer.out.flush()
}

/// Buffers writes and keeps the running CRC-64 of everything put.
struct SnapshotWriter<'w, W: Write> {
    out: &'w mut W,
    buffer: Vec<u8>,
    crc: u64,
}

impl<W: Write> SnapshotWriter<'_, W> {
    fn put(&mut self, data: &[u8]) -> io::Result<()> {
        self.crc = crc64(self.crc, data);
        self.put_unchecked(data)
    }

    /// Writes without adding to the checksum (the checksum itself).
    fn put_unchecked(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buffer.len() + data.len() > BUFFER_BYTES {
            self.flush_buffer()?;
            if data.len() >= BUFFER_BYTES {
                return self.out.write_all(data);
            }
        }
        self.buffer.extend_from_slice(data);
        Ok(())
    }

    fn varint(&mut self, value: u64) -> io::Result<()> {
        if self.buffer.len() + 10 > BUFFER_BYTES {
            self.flush_buffer()?;
        }
        let start = self.buffer.len();
        dump::put_length(&mut self.buffer, value);
        self.crc = crc64(self.crc, &self.buffer[start..]);
        Ok(())
    }

    fn flush_buffer(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

/// The encoding byte of a value.
fn encoding_of(value: &Value) -> u8 {
    match value {
        Value::String(StringValue::Int(_)) => encoding::INT,
        Value::String(StringValue::Inline { .. } | StringValue::Bytes { raw: false, .. }) => {
            encoding::EMBSTR
        }
        Value::String(StringValue::Bytes { raw: true, .. }) => encoding::RAW,
        Value::List(list) if list.is_quicklist() => encoding::QUICKLIST,
        Value::List(_) => encoding::LISTPACK,
        Value::Hash(hash) if hash.is_table() => encoding::HASHTABLE,
        Value::Hash(_) => encoding::LISTPACK,
        Value::Set(set) => match set.encoding() {
            SetEncoding::Intset => encoding::INTSET,
            SetEncoding::Listpack => encoding::LISTPACK,
            SetEncoding::Table => encoding::HASHTABLE,
        },
        Value::ZSet(zset) if zset.is_skiplist() => encoding::ZSET_SKIPLIST,
        Value::ZSet(_) => encoding::ZSET_LISTPACK,
        Value::Stream(_) => encoding::STREAM,
    }
}

/// Gives a decoded value (which DUMP's decoder encodes as a load would) the
/// encoding it had when written.
fn with_encoding(value: Value, tag: u8) -> Result<Value, SnapshotError> {
    match value {
        Value::String(string) => string_with_encoding(string, tag).map(Value::String),
        Value::List(mut list) => {
            match tag {
                encoding::LISTPACK => list.set_quicklist(false),
                encoding::QUICKLIST => list.set_quicklist(true),
                other => return Err(corrupt(format!("encoding {other} for a list"))),
            }
            Ok(Value::List(list))
        }
        // Decoded in their recorded layout already (see `layout_of`).
        value @ (Value::Hash(_) | Value::Set(_)) => Ok(value),
        Value::ZSet(mut zset) => {
            match tag {
                // A set too large for a listpack cannot have been one.
                encoding::ZSET_LISTPACK if zset.is_skiplist() => {
                    return Err(corrupt("a listpack sorted set past the listpack limits"))
                }
                encoding::ZSET_LISTPACK => {}
                encoding::ZSET_SKIPLIST => zset.convert_to_skiplist(),
                other => return Err(corrupt(format!("encoding {other} for a sorted set"))),
            }
            Ok(Value::ZSet(zset))
        }
        Value::Stream(stream) => match tag {
            encoding::STREAM => Ok(Value::Stream(stream)),
            other => Err(corrupt(format!("encoding {other} for a stream"))),
        },
    }
}

/// How the body of a set or hash recorded with encoding `tag` is to be
/// rebuilt: exactly in that encoding and order, so the loaded value iterates,
/// scans and picks as the written one did.
fn layout_of(body: &[u8], tag: u8) -> Result<dump::Layout, SnapshotError> {
    let layout = match (body.first().copied(), tag) {
        (Some(dump::type_byte::SET), encoding::INTSET) => dump::Layout::Set(SetEncoding::Intset),
        (Some(dump::type_byte::SET), encoding::LISTPACK) => {
            dump::Layout::Set(SetEncoding::Listpack)
        }
        (Some(dump::type_byte::SET), encoding::HASHTABLE) => dump::Layout::Set(SetEncoding::Table),
        (Some(dump::type_byte::HASH), encoding::LISTPACK) => dump::Layout::Hash { table: false },
        (Some(dump::type_byte::HASH), encoding::HASHTABLE) => dump::Layout::Hash { table: true },
        (Some(kind @ (dump::type_byte::SET | dump::type_byte::HASH)), other) => {
            return Err(corrupt(format!("encoding {other} for value type {kind}")))
        }
        _ => dump::Layout::Loaded,
    };
    Ok(layout)
}

fn string_with_encoding(string: StringValue, tag: u8) -> Result<StringValue, SnapshotError> {
    let string = match (tag, string) {
        (encoding::INT, string @ StringValue::Int(_)) => string,
        (encoding::INT, _) => return Err(corrupt("int encoding of a non-integer string")),
        (encoding::EMBSTR, StringValue::Int(integer)) => {
            StringValue::embedded(integer.to_string().as_bytes())
        }
        (encoding::EMBSTR, string @ StringValue::Inline { .. }) => string,
        (encoding::EMBSTR, StringValue::Bytes { data, .. }) => {
            if data.len() > EMBSTR_MAX_BYTES {
                return Err(corrupt("embstr encoding of a long string"));
            }
            StringValue::Bytes { data, raw: false }
        }
        (encoding::RAW, StringValue::Int(integer)) => {
            StringValue::raw(integer.to_string().into_bytes())
        }
        (encoding::RAW, StringValue::Inline { length, data }) => {
            StringValue::raw(data[..usize::from(length)].to_vec())
        }
        (encoding::RAW, StringValue::Bytes { data, .. }) => StringValue::raw(data),
        (other, _) => return Err(corrupt(format!("unknown encoding {other}"))),
    };
    Ok(string)
}

// ---- Reading -------------------------------------------------------------------

/// Reads a snapshot written by [`write_snapshot`] into a new keyspace with
/// `config`. The input must hold exactly one snapshot: bytes after its checksum
/// are an error. Loaded keys carry no access data (0) and the statistics start at
/// zero.
pub fn read_snapshot(
    input: &mut impl Read,
    config: KeyspaceConfig,
) -> Result<Keyspace, SnapshotError> {
    let mut reader = SnapshotReader {
        input,
        buffer: vec![0u8; BUFFER_BYTES].into_boxed_slice(),
        start: 0,
        end: 0,
        crc: 0,
    };
    let mut magic = [0u8; 8];
    reader.exact(&mut magic, "magic")?;
    if &magic != MAGIC {
        return Err(corrupt("not a slotraft snapshot (bad magic)"));
    }
    let version = u32::from_le_bytes(reader.array("version")?);
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let flags = if version >= 2 {
        let [flags] = reader.array("flags")?;
        flags
    } else {
        0
    };
    if flags & !(FLAG_SLOT_INDEX | FLAG_SLOT_STATES | FLAG_SCRIPTS) != 0 {
        return Err(corrupt(format!("unknown flags {flags:#04x}")));
    }
    let slot_states = if flags & FLAG_SLOT_STATES != 0 {
        read_slot_states(&mut reader)?
    } else {
        BTreeMap::new()
    };
    let scripts = if flags & FLAG_SCRIPTS != 0 {
        read_scripts(&mut reader)?
    } else {
        ScriptStore::default()
    };
    let database_count = reader.varint("database count")?;
    if database_count == 0 || database_count > MAX_DATABASES {
        return Err(corrupt(format!("{database_count} databases")));
    }
    let mut dbs = Vec::new();
    let mut key = Vec::new();
    let mut body = Vec::new();
    for expected_index in 0..database_count {
        let index = reader.varint("database index")?;
        if index != expected_index {
            return Err(corrupt(format!(
                "database {index} where {expected_index} was expected"
            )));
        }
        let hash_key = (
            u64::from_le_bytes(reader.array("hash key")?),
            u64::from_le_bytes(reader.array("hash key")?),
        );
        let key_buckets = reader.varint("key table size")?;
        let expire_buckets = reader.varint("expiry table size")?;
        let expire_cursor = u64::from_le_bytes(reader.array("expiry cursor")?);
        let key_count = reader.varint("key count")?;
        let mut db = Db::new(hash_key);
        if flags & FLAG_SLOT_INDEX != 0 {
            db.enable_slot_index();
        }
        for _ in 0..key_count {
            let key_length = reader.varint("key length")?;
            if key_length > MAX_KEY_BYTES {
                return Err(corrupt(format!("key of {key_length} bytes")));
            }
            reader.bytes(&mut key, key_length, "key")?;
            let expire_at_ms = u64::from_le_bytes(reader.array("expiry time")?);
            let [tag] = reader.array("encoding")?;
            let body_length = reader.varint("value length")?;
            if body_length > MAX_VALUE_BYTES {
                return Err(corrupt(format!("value of {body_length} bytes")));
            }
            reader.bytes(&mut body, body_length, "value")?;
            let value = dump::decode_body_with_layout(&body, layout_of(&body, tag)?)
                .map_err(|_| corrupt("undecodable value"))?;
            let value = with_encoding(value, tag)?;
            let expire_at_ms = (expire_at_ms != 0).then_some(expire_at_ms);
            db.restore_entry(&key, value, expire_at_ms, 0)
                .map_err(|error| corrupt(format!("database {index}: {error}")))?;
            if body.capacity() > SCRATCH_KEEP_BYTES {
                body = Vec::new();
            }
            if key.capacity() > SCRATCH_KEEP_BYTES {
                key = Vec::new();
            }
        }
        let layout = DbLayout {
            key_buckets,
            expire_buckets,
            expire_cursor,
        };
        db.restore_layout(layout)
            .map_err(|error| corrupt(format!("database {index}: {error}")))?;
        dbs.push(db);
    }
    let [marker] = reader.array("end marker")?;
    if marker != END_MARKER {
        return Err(corrupt(format!(
            "{marker:#04x} where the end marker was expected"
        )));
    }
    let computed = reader.crc;
    let mut stored = [0u8; 8];
    reader.exact_unchecked(&mut stored, "checksum")?;
    if u64::from_le_bytes(stored) != computed {
        return Err(corrupt("checksum mismatch"));
    }
    if !reader.at_end()? {
        return Err(corrupt("trailing bytes after the checksum"));
    }
    let mut keyspace = Keyspace::from_parts(dbs, slot_states, config);
    keyspace.scripts = scripts;
    Ok(keyspace)
}

/// The scripts section (present only with [`FLAG_SCRIPTS`]): cached script
/// bodies, then function libraries, each map in strictly increasing name order.
fn read_scripts<R: Read>(reader: &mut SnapshotReader<'_, R>) -> Result<ScriptStore, SnapshotError> {
    let mut store = ScriptStore::default();
    for (map, what) in [
        (&mut store.scripts, "script"),
        (&mut store.libraries, "library"),
    ] {
        let count = reader.varint(what)?;
        for _ in 0..count {
            let mut parts = [Vec::new(), Vec::new()];
            for part in &mut parts {
                let length = reader.varint(what)?;
                if length > MAX_SCRIPT_BYTES {
                    return Err(corrupt(format!("{what} of {length} bytes")));
                }
                reader.bytes(part, length, what)?;
            }
            let [name, code] = parts;
            let name = Bytes::from(name);
            if map.keys().next_back().is_some_and(|last| *last >= name) {
                return Err(corrupt(format!("{what} names out of order")));
            }
            map.insert(name, Bytes::from(code));
        }
    }
    Ok(store)
}

/// The slot states section (present only with [`FLAG_SLOT_STATES`]): a count of
/// at least one, then slots in strictly increasing order, each with a known state.
fn read_slot_states<R: Read>(
    reader: &mut SnapshotReader<'_, R>,
) -> Result<BTreeMap<u16, SlotState>, SnapshotError> {
    let count = reader.varint("slot state count")?;
    if count == 0 || count > u64::from(SLOTS) {
        return Err(corrupt(format!("{count} slot states")));
    }
    let mut states = BTreeMap::new();
    let mut previous = None;
    for _ in 0..count {
        let slot = u16::from_le_bytes(reader.array("slot")?);
        let [byte] = reader.array("slot state")?;
        if slot >= SLOTS {
            return Err(corrupt(format!("state for slot {slot}")));
        }
        if previous.is_some_and(|previous| slot <= previous) {
            return Err(corrupt(format!("slot {slot} out of order")));
        }
        previous = Some(slot);
        let state = match byte {
            STATE_FROZEN => SlotState::Frozen,
            STATE_GONE => SlotState::Gone,
            other => {
                return Err(corrupt(format!("unknown state {other} for slot {slot}")));
            }
        };
        states.insert(slot, state);
    }
    Ok(states)
}

/// Buffers reads and keeps the running CRC-64 of everything consumed.
struct SnapshotReader<'r, R: Read> {
    input: &'r mut R,
    buffer: Box<[u8]>,
    /// Unconsumed bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
    crc: u64,
}

impl<R: Read> SnapshotReader<'_, R> {
    /// Refills the empty buffer; false at the end of the input.
    fn fill(&mut self) -> Result<bool, SnapshotError> {
        debug_assert_eq!(self.start, self.end);
        loop {
            match self.input.read(&mut self.buffer) {
                Ok(count) => {
                    self.start = 0;
                    self.end = count.min(self.buffer.len());
                    return Ok(count > 0);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(SnapshotError::Io(error)),
            }
        }
    }

    /// How many of the next `wanted` bytes are buffered (at least one),
    /// refilling when needed; they are `buffer[start..start + count]`.
    fn available(&mut self, wanted: usize, what: &str) -> Result<usize, SnapshotError> {
        if self.start == self.end && !self.fill()? {
            return Err(corrupt(format!("truncated in the {what}")));
        }
        Ok(wanted.min(self.end - self.start))
    }

    /// Fills `out`, adding the bytes to the checksum unless `unchecked`.
    fn read_into(
        &mut self,
        out: &mut [u8],
        what: &str,
        unchecked: bool,
    ) -> Result<(), SnapshotError> {
        let mut done = 0;
        while done < out.len() {
            let count = self.available(out.len() - done, what)?;
            let chunk = &self.buffer[self.start..self.start + count];
            out[done..done + count].copy_from_slice(chunk);
            if !unchecked {
                self.crc = crc64(self.crc, chunk);
            }
            self.start += count;
            done += count;
        }
        Ok(())
    }

    fn exact(&mut self, out: &mut [u8], what: &str) -> Result<(), SnapshotError> {
        self.read_into(out, what, false)
    }

    fn exact_unchecked(&mut self, out: &mut [u8], what: &str) -> Result<(), SnapshotError> {
        self.read_into(out, what, true)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], SnapshotError> {
        let mut out = [0u8; N];
        self.exact(&mut out, what)?;
        Ok(out)
    }

    fn varint(&mut self, what: &str) -> Result<u64, SnapshotError> {
        let mut failure = None;
        let value = dump::decode_varint(|| match self.array::<1>(what) {
            Ok([byte]) => Some(byte),
            Err(error) => {
                failure = Some(error);
                None
            }
        });
        match (failure, value) {
            (Some(error), _) => Err(error),
            (None, Some(value)) => Ok(value),
            (None, None) => Err(corrupt(format!("malformed varint in the {what}"))),
        }
    }

    /// Replaces `out` with the next `length` bytes, growing it only as they
    /// arrive.
    fn bytes(&mut self, out: &mut Vec<u8>, length: u64, what: &str) -> Result<(), SnapshotError> {
        out.clear();
        let length = usize::try_from(length).map_err(|_| corrupt(format!("{what} too long")))?;
        while out.len() < length {
            let count = self.available(length - out.len(), what)?;
            let chunk = &self.buffer[self.start..self.start + count];
            out.extend_from_slice(chunk);
            self.crc = crc64(self.crc, chunk);
            self.start += count;
        }
        Ok(())
    }

    /// Whether the input has nothing left.
    fn at_end(&mut self) -> Result<bool, SnapshotError> {
        Ok(self.start == self.end && !self.fill()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::digest;
    use crate::rng::Rng;
    use crate::testing::{Harness, START_MS};
    use crate::{Context, Entry};
    use proptest::prelude::*;
    use resp::Frame;

    fn to_bytes(keyspace: &Keyspace) -> Vec<u8> {
        let mut out = Vec::new();
        write_snapshot(keyspace, &mut out).expect("writing to a Vec");
        out
    }

    fn load(data: &[u8]) -> Result<Keyspace, SnapshotError> {
        read_snapshot(&mut &data[..], KeyspaceConfig::default())
    }

    /// Runs a command (by its words) against `keyspace`.
    fn run(keyspace: &mut Keyspace, context: &mut Context, words: &[&str]) -> Frame {
        let arguments: Vec<bytes::Bytes> = words
            .iter()
            .map(|word| bytes::Bytes::copy_from_slice(word.as_bytes()))
            .collect();
        match crate::commands::resolve(&arguments) {
            Ok(spec) => keyspace.execute(spec, context, &arguments),
            Err(error) => error,
        }
    }

    /// A keyspace with a history: several databases, every string encoding, TTLs
    /// past and future, deletions (so table sizes are not what the key counts
    /// alone give), a SWAPDB (so hash keys are not where `Keyspace::new` put
    /// them) and a partial active-expiry pass (so the cursor moved).
    fn random_keyspace(seed: u64) -> (Keyspace, u64) {
        let mut rng = Rng::new(seed);
        let databases = 1 + rng.below(5) as usize;
        let mut keyspace = Keyspace::new(databases, rng.next_u64());
        // A third of the keyspaces keep a slot index from the start, a third get
        // one built after their history.
        if seed % 3 == 1 {
            keyspace.enable_slot_index();
        }
        let mut context = Context::new(START_MS, rng.next_u64());
        let key_count = rng.below(400);
        for index in 0..key_count {
            context.db = rng.below(databases as u64) as usize;
            let key = match rng.below(4) {
                0 => format!("k{index}"),
                1 => format!("a-rather-long-key-name-beyond-the-inline-size:{index}"),
                2 => format!("{index}"),
                _ => format!("key\0\u{ff}:{index}"),
            };
            let value = match rng.below(7) {
                0 => (rng.next_u64() as i64).to_string(),
                1 => "short".to_string(),
                2 => "x".repeat(23 + rng.below(22) as usize),
                3 => "y".repeat(45 + rng.below(300) as usize),
                4 => String::new(),
                _ => format!("v{}", rng.next_u64()),
            };
            run(&mut keyspace, &mut context, &["SET", &key, &value]);
            match rng.below(10) {
                // raw by APPEND / SETRANGE, embstr digits by INCRBYFLOAT.
                0 => {
                    run(&mut keyspace, &mut context, &["APPEND", &key, "+"]);
                }
                1 => {
                    run(&mut keyspace, &mut context, &["SETRANGE", &key, "0", "7"]);
                }
                2 => {
                    run(&mut keyspace, &mut context, &["SET", &key, "3"]);
                    run(&mut keyspace, &mut context, &["INCRBYFLOAT", &key, "2"]);
                }
                // Lists, small (listpack) and large (quicklist).
                3 => {
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["RPUSH", &key, "a", "12", &value],
                    );
                }
                4 if index % 16 == 0 => {
                    let large = "l".repeat(8200);
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["LPUSH", &key, &large, &value],
                    );
                }
                // Hashes: listpack, or a hashtable shuffled by deletions.
                // Sorted sets: listpack, skiplist, and a skiplist shrunk small.
                5 => {
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["HSET", &key, "f", &value, "n", "12"],
                    );
                    if index % 4 == 0 {
                        for field in 0..140 {
                            let field = format!("field{field}");
                            run(&mut keyspace, &mut context, &["HSET", &key, &field, "v"]);
                        }
                        for field in (0..140).step_by(3) {
                            let field = format!("field{field}");
                            run(&mut keyspace, &mut context, &["HDEL", &key, &field]);
                        }
                    }
                }
                // Sets: intset, listpack, or a hashtable shuffled by removals.
                6 => {
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(&mut keyspace, &mut context, &["SADD", &key, "3", "1", "2"]);
                    if index % 3 == 0 {
                        run(&mut keyspace, &mut context, &["SADD", &key, &value, "m"]);
                    }
                    if index % 4 == 0 {
                        for member in 0..200 {
                            let member = format!("member{member}");
                            run(&mut keyspace, &mut context, &["SADD", &key, &member]);
                        }
                        for member in (0..200).step_by(3) {
                            let member = format!("member{member}");
                            run(&mut keyspace, &mut context, &["SREM", &key, &member]);
                        }
                    }
                }
                // Sorted sets: listpack, skiplist, and a skiplist shrunk small.
                7 => {
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["ZADD", &key, "1.5", "a", "-inf", &value, "0", "z"],
                    );
                }
                8 if index % 8 == 0 => {
                    let long = "s".repeat(65);
                    run(&mut keyspace, &mut context, &["DEL", &key]);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["ZADD", &key, "2", &long, "1", &value, "3", "x"],
                    );
                    if index % 16 == 0 {
                        run(&mut keyspace, &mut context, &["ZREM", &key, &long]);
                    }
                }
                _ => {}
            }
            match rng.below(4) {
                // Expires before the snapshot is taken (kept unless touched).
                0 => {
                    let at = START_MS + 1 + rng.below(1_000);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["PEXPIREAT", &key, &at.to_string()],
                    );
                }
                // Expires later.
                1 => {
                    let at = START_MS + 10_000 + rng.below(1_000_000);
                    run(
                        &mut keyspace,
                        &mut context,
                        &["PEXPIREAT", &key, &at.to_string()],
                    );
                }
                _ => {}
            }
        }
        // Delete a good part of one database so its tables shrink (or not).
        context.db = 0;
        for index in 0..key_count {
            if rng.below(3) > 0 {
                run(&mut keyspace, &mut context, &["DEL", &format!("k{index}")]);
            }
        }
        if databases > 1 {
            let first = rng.below(databases as u64).to_string();
            let second = rng.below(databases as u64).to_string();
            run(&mut keyspace, &mut context, &["SWAPDB", &first, &second]);
        }
        let now_ms = START_MS + 5_000;
        keyspace.db(0).active_expire_cycle(now_ms, 1);
        if seed % 3 == 2 {
            keyspace.enable_slot_index();
        }
        (keyspace, now_ms)
    }

    /// Every database holds the same entries in the same table order, with the same
    /// hash key and layout.
    fn assert_same_state(original: &Keyspace, loaded: &Keyspace) {
        assert_eq!(original.database_count(), loaded.database_count());
        for (index, (first, second)) in original.dbs().iter().zip(loaded.dbs()).enumerate() {
            assert_eq!(first.hash_key(), second.hash_key(), "db {index}");
            assert_eq!(first.layout(), second.layout(), "db {index}");
            assert_eq!(first.len(), second.len(), "db {index}");
            assert_eq!(first.expires_len(), second.expires_len(), "db {index}");
            assert_eq!(first.has_slot_index(), second.has_slot_index());
            assert!(first.slot_index_is_exact(), "db {index}");
            assert!(second.slot_index_is_exact(), "db {index}");
            for (key, _) in first.entries().take(20) {
                let slot = cluster::key_slot(key);
                assert_eq!(
                    first.count_keys_in_slot(slot),
                    second.count_keys_in_slot(slot)
                );
                assert_eq!(
                    first.keys_in_slot(slot, None, 100),
                    second.keys_in_slot(slot, None, 100)
                );
            }
            let strip = |(key, entry): (&[u8], &Entry)| {
                (key.to_vec(), entry.value.clone(), entry.expire_at_ms())
            };
            let first: Vec<_> = first.entries().map(strip).collect();
            let second: Vec<_> = second.entries().map(strip).collect();
            assert_eq!(first, second, "db {index}");
        }
    }

    fn assert_round_trip(seed: u64) {
        let (original, now_ms) = random_keyspace(seed);
        let data = to_bytes(&original);
        let loaded = load(&data).expect("a snapshot just written loads");
        assert_same_state(&original, &loaded);
        for time in [0, START_MS, now_ms, now_ms + 20_000, u64::MAX] {
            assert_eq!(digest(&original, time), digest(&loaded, time), "at {time}");
        }
        // Writing the loaded keyspace gives the very same bytes.
        assert_eq!(to_bytes(&loaded), data);

        // Both go on the same way under the same log: active expiry reclaims the
        // same keys, SCAN and RANDOMKEY answer alike, encodings match.
        let mut original = original;
        let mut loaded = loaded;
        let later = now_ms + 300_000;
        for _ in 0..3 {
            assert_eq!(
                original.active_expire_cycle(later),
                loaded.active_expire_cycle(later)
            );
            assert_same_state(&original, &loaded);
        }
        for db in 0..original.database_count() {
            let mut first = Context::new(later, seed);
            let mut second = Context::new(later, seed);
            first.db = db;
            second.db = db;
            for words in [
                &["SCAN", "0", "COUNT", "7"][..],
                &["SCAN", "5", "COUNT", "3"],
                &["RANDOMKEY"],
                &["RANDOMKEY"],
                &["KEYS", "*"],
                &["DBSIZE"],
                &["OBJECT", "ENCODING", "k3"],
                &["OBJECT", "ENCODING", "7"],
            ] {
                assert_eq!(
                    run(&mut original, &mut first, words),
                    run(&mut loaded, &mut second, words),
                    "{words:?} in db {db}"
                );
            }
        }
        assert_same_state(&original, &loaded);
    }

    /// Hashes and sets come back in their encoding and storage order, so a
    /// loaded replica scans, picks and pops exactly as the one it came from.
    #[test]
    fn hashes_and_sets_behave_identically_after_a_round_trip() {
        let mut original = Keyspace::new(1, 5);
        let mut context = Context::new(START_MS, 9);
        for index in 0..700 {
            let member = format!("m{index}");
            run(&mut original, &mut context, &["SADD", "table-set", &member]);
            run(
                &mut original,
                &mut context,
                &["HSET", "table-hash", &member, "v"],
            );
        }
        for index in (0..700).step_by(4) {
            let member = format!("m{index}");
            run(&mut original, &mut context, &["SREM", "table-set", &member]);
            run(
                &mut original,
                &mut context,
                &["HDEL", "table-hash", &member],
            );
        }
        // A hashtable of integers only: a load by size alone would make it an
        // intset and lose its order.
        for index in 0..600 {
            run(
                &mut original,
                &mut context,
                &["SADD", "int-table", &index.to_string()],
            );
        }
        for index in 0..590 {
            run(
                &mut original,
                &mut context,
                &["SREM", "int-table", &index.to_string()],
            );
        }
        run(
            &mut original,
            &mut context,
            &["SADD", "intset", "5", "1", "3"],
        );
        run(
            &mut original,
            &mut context,
            &["SADD", "listpack-set", "b", "a", "7"],
        );
        run(
            &mut original,
            &mut context,
            &["HSET", "listpack-hash", "b", "1", "a", "2"],
        );
        let mut loaded = load(&to_bytes(&original)).expect("loads");
        assert_same_state(&original, &loaded);
        for (key, encoding) in [
            ("table-set", "hashtable"),
            ("table-hash", "hashtable"),
            ("int-table", "hashtable"),
            ("intset", "intset"),
            ("listpack-set", "listpack"),
            ("listpack-hash", "listpack"),
        ] {
            let words = ["OBJECT", "ENCODING", key];
            assert_eq!(
                run(&mut loaded, &mut context, &words),
                Frame::bulk(encoding.to_string()),
                "{key}"
            );
        }
        let mut first = Context::new(START_MS + 1, 77);
        let mut second = Context::new(START_MS + 1, 77);
        for words in [
            &["SSCAN", "table-set", "0", "COUNT", "10"][..],
            &["SSCAN", "table-set", "100", "COUNT", "10"],
            &["SMEMBERS", "int-table"],
            &["SRANDMEMBER", "table-set", "-5"],
            &["SRANDMEMBER", "table-set", "5"],
            &["SPOP", "table-set", "7"],
            &["SPOP", "int-table"],
            &["HSCAN", "table-hash", "0", "COUNT", "10"],
            &["HRANDFIELD", "table-hash", "-4", "WITHVALUES"],
            &["HKEYS", "table-hash"],
            &["SMEMBERS", "listpack-set"],
            &["HGETALL", "listpack-hash"],
        ] {
            assert_eq!(
                run(&mut original, &mut first, words),
                run(&mut loaded, &mut second, words),
                "{words:?}"
            );
        }
        assert_same_state(&original, &loaded);
    }

    #[test]
    fn set_and_hash_encodings_must_fit_their_values() {
        let set = Value::set(["b", "a"]);
        let hash = Value::hash([("f", "v")]);
        let ints = Value::set(["2", "1"]);
        for (value, tag) in [
            (&set, encoding::LISTPACK),
            (&set, encoding::HASHTABLE),
            (&hash, encoding::LISTPACK),
            (&hash, encoding::HASHTABLE),
            (&ints, encoding::INTSET),
        ] {
            let entry = value_entry_bytes(b"k", tag, value);
            assert!(load(&sealed_db(4, 0, &entry, 1)).is_ok(), "{value:?} {tag}");
        }
        for (value, tag) in [
            (&set, encoding::INTSET),
            (&set, encoding::RAW),
            (&hash, encoding::INTSET),
            (&hash, encoding::QUICKLIST),
        ] {
            let entry = value_entry_bytes(b"k", tag, value);
            assert!(
                load(&sealed_db(4, 0, &entry, 1)).is_err(),
                "{value:?} {tag}"
            );
        }
        // An intset body out of order is refused.
        let mut body = vec![dump::type_byte::SET];
        dump::put_length(&mut body, 2);
        for member in [b"2", b"1"] {
            dump::put_length(&mut body, 1);
            body.extend_from_slice(member);
        }
        let mut entry = Vec::new();
        dump::put_length(&mut entry, 1);
        entry.extend_from_slice(b"k");
        entry.extend_from_slice(&0u64.to_le_bytes());
        entry.push(encoding::INTSET);
        dump::put_length(&mut entry, body.len() as u64);
        entry.extend_from_slice(&body);
        assert!(load(&sealed_db(4, 0, &entry, 1)).is_err());
    }

    #[test]
    fn round_trips_keep_state_layout_and_behaviour() {
        let mut history_shaped_tables = 0;
        let mut moved_hash_keys = 0;
        let mut list_encodings = std::collections::BTreeSet::new();
        let mut aggregate_encodings = std::collections::BTreeSet::new();
        let mut zset_encodings = std::collections::BTreeSet::new();
        for seed in 0..40 {
            assert_round_trip(seed);
            // The samples must exercise what a naive rebuild would get wrong.
            let (keyspace, _) = random_keyspace(seed);
            let fresh = Keyspace::new(keyspace.database_count(), 0);
            for db in keyspace.dbs() {
                for (_, entry) in db.entries() {
                    if entry.value.is_list() {
                        list_encodings.insert(entry.value.encoding_name());
                    }
                    if matches!(entry.value, Value::Hash(_) | Value::Set(_)) {
                        aggregate_encodings
                            .insert((entry.value.type_name(), entry.value.encoding_name()));
                    }
                    if entry.value.is_zset() {
                        zset_encodings.insert(entry.value.encoding_name());
                    }
                }
                let natural = (db.len() as u64).next_power_of_two().max(4);
                if !db.is_empty() && db.layout().key_buckets != natural {
                    history_shaped_tables += 1;
                }
            }
            let mut rebuilt = fresh;
            for (index, db) in keyspace.dbs().iter().enumerate() {
                for (key, entry) in db.entries() {
                    let value = entry.value.clone();
                    rebuilt.db(index).set(key, value, entry.expire_at_ms(), 0);
                }
            }
            if (0..keyspace.database_count()).any(|index| {
                let keys = |keyspace: &Keyspace| -> Vec<Vec<u8>> {
                    keyspace
                        .db_ref(index)
                        .entries()
                        .map(|(key, _)| key.to_vec())
                        .collect()
                };
                keys(&keyspace) != keys(&rebuilt)
            }) {
                moved_hash_keys += 1;
            }
        }
        assert!(history_shaped_tables > 0);
        assert!(moved_hash_keys > 0);
        assert_eq!(list_encodings.len(), 2, "{list_encodings:?}");
        assert_eq!(
            aggregate_encodings.len(),
            5,
            "hash and set encodings: {aggregate_encodings:?}"
        );
        assert_eq!(zset_encodings.len(), 2, "{zset_encodings:?}");
    }

    #[test]
    fn round_trip_keeps_every_encoding() {
        let mut h = Harness::new();
        h.set("int", "12345");
        h.set("inline", "short");
        h.set("embstr", &"e".repeat(40));
        h.set("raw-long", &"r".repeat(100));
        h.set("raw-short", "ab");
        h.run(&["APPEND", "raw-short", "c"]);
        h.set("raw-digits", "12");
        h.run(&["APPEND", "raw-digits", "3"]);
        h.set("embstr-digits", "1");
        h.run(&["INCRBYFLOAT", "embstr-digits", "2"]);
        h.set("empty", "");
        h.run(&["RPUSH", "listpack", "a", "1"]);
        h.run(&["RPUSH", "quicklist", &"q".repeat(9000)]);
        // A quicklist that shrank to listpack size without the shrink check
        // running (LINSERT only grows) keeps its encoding through a snapshot.
        h.run(&["RPUSH", "grown", "a"]);
        h.run(&["LINSERT", "grown", "AFTER", "none", &"g".repeat(9000)]);
        h.run(&["ZADD", "zset-listpack", "1", "a", "-0", "b"]);
        h.run(&["ZADD", "zset-skiplist", "1", &"s".repeat(65)]);
        // A skiplist that shrank back to listpack size stays a skiplist.
        h.run(&["ZADD", "zset-shrunk", "1", "a", "2", &"s".repeat(65)]);
        h.run(&["ZPOPMAX", "zset-shrunk"]);
        let expected = [
            ("int", "int"),
            ("inline", "embstr"),
            ("embstr", "embstr"),
            ("raw-long", "raw"),
            ("raw-short", "raw"),
            ("raw-digits", "raw"),
            ("embstr-digits", "embstr"),
            ("empty", "embstr"),
            ("listpack", "listpack"),
            ("quicklist", "quicklist"),
            ("grown", "quicklist"),
            ("zset-listpack", "listpack"),
            ("zset-skiplist", "skiplist"),
            ("zset-shrunk", "skiplist"),
        ];
        for (key, encoding) in expected {
            assert_eq!(h.encoding(key), Some(encoding), "{key} before");
        }
        let loaded = load(&to_bytes(&h.keyspace)).unwrap();
        assert_same_state(&h.keyspace, &loaded);
        h.keyspace = loaded;
        for (key, encoding) in expected {
            assert_eq!(h.encoding(key), Some(encoding), "{key} after");
        }
        assert_eq!(h.run(&["GET", "raw-digits"]), Frame::bulk("123"));
        assert_eq!(h.run(&["GET", "embstr-digits"]), Frame::bulk("3"));
    }

    #[test]
    fn expired_keys_not_yet_deleted_are_kept() {
        let mut h = Harness::new();
        h.set_with_expiry("gone", "v", START_MS + 10);
        h.set("kept", "w");
        h.advance(1_000);
        let loaded = load(&to_bytes(&h.keyspace)).unwrap();
        assert_eq!(loaded.db_ref(0).len(), 2);
        assert_eq!(
            loaded
                .db_ref(0)
                .peek(b"gone", START_MS)
                .and_then(Entry::expire_at_ms),
            Some(START_MS + 10)
        );
        assert!(loaded.db_ref(0).peek(b"gone", START_MS + 1_000).is_none());
    }

    #[test]
    fn empty_keyspaces_round_trip() {
        for databases in [1, 16] {
            let empty = Keyspace::new(databases, 5);
            let data = to_bytes(&empty);
            let loaded = load(&data).unwrap();
            assert_same_state(&empty, &loaded);
            assert_eq!(digest(&loaded, 0), digest(&empty, 0));
            assert_eq!(to_bytes(&loaded), data);
        }
        // Emptied after use: tables allocated but empty.
        let mut h = Harness::new();
        h.set("a", "1");
        h.run(&["DEL", "a"]);
        let loaded = load(&to_bytes(&h.keyspace)).unwrap();
        assert_same_state(&h.keyspace, &loaded);
    }

    #[test]
    fn loading_takes_the_given_configuration_and_no_statistics() {
        let mut h = Harness::new();
        h.set("a", "1");
        h.run(&["GET", "a"]);
        let config = KeyspaceConfig {
            lfu: true,
            ..KeyspaceConfig::default()
        };
        let loaded = read_snapshot(&mut &to_bytes(&h.keyspace)[..], config).unwrap();
        assert!(loaded.config.lfu);
        assert_eq!(loaded.stats.keyspace_hits, 0);
        assert_eq!(loaded.stats.dirty, 0);
        assert_eq!(
            loaded.db_ref(0).peek(b"a", 0).map(|entry| entry.access),
            Some(0)
        );
    }

    #[test]
    fn the_header_is_as_documented() {
        let data = to_bytes(&Keyspace::new(1, 3));
        assert_eq!(&data[..8], b"SLRFSNAP");
        assert_eq!(&data[8..12], &2u32.to_le_bytes());
        assert_eq!(data[12], 0, "no flags");
        assert_eq!(data[13], 1, "one database");
        assert_eq!(data[14], 0, "database 0");
        let checked = data.len() - 8;
        assert_eq!(data[checked - 1], END_MARKER);
        assert_eq!(data[checked..], crc64(0, &data[..checked]).to_le_bytes());
    }

    #[test]
    fn clones_are_exact_and_independent() {
        let (original, now_ms) = random_keyspace(77);
        let mut copy = original.clone();
        assert_same_state(&original, &copy);
        assert_eq!(to_bytes(&copy), to_bytes(&original));
        let before = digest(&original, now_ms);
        let mut context = Context::new(now_ms, 1);
        run(&mut copy, &mut context, &["SET", "only-in-the-copy", "1"]);
        run(&mut copy, &mut context, &["FLUSHALL"]);
        assert_eq!(digest(&original, now_ms), before);
    }

    /// A reader handing out one byte per call, to exercise buffer refills.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), out.first_mut()) {
                (Some((&byte, rest)), Some(slot)) => {
                    *slot = byte;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn reads_through_any_chunking() {
        let (original, _) = random_keyspace(3);
        let data = to_bytes(&original);
        let loaded = read_snapshot(&mut Trickle(&data), KeyspaceConfig::default()).unwrap();
        assert_same_state(&original, &loaded);
        let mut big = Keyspace::new(1, 1);
        let mut context = Context::new(START_MS, 1);
        run(
            &mut big,
            &mut context,
            &["SET", "big", &"b".repeat(300_000)],
        );
        let data = to_bytes(&big);
        let loaded = read_snapshot(&mut Trickle(&data), KeyspaceConfig::default()).unwrap();
        assert_same_state(&big, &loaded);
    }

    /// A writer that fails after some bytes.
    struct Failing(usize);

    impl Write for Failing {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk full"));
            }
            let count = data.len().min(self.0);
            self.0 -= count;
            Ok(count)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_are_reported() {
        let (original, _) = random_keyspace(5);
        let size = to_bytes(&original).len();
        for limit in [0, 10, size / 2, size - 1] {
            assert!(write_snapshot(&original, &mut Failing(limit)).is_err());
        }
        assert!(write_snapshot(&original, &mut Failing(size)).is_ok());
    }

    struct Broken;

    impl Read for Broken {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other("unplugged"))
        }
    }

    #[test]
    fn read_errors_are_io_errors() {
        let error = read_snapshot(&mut Broken, KeyspaceConfig::default()).err();
        assert!(matches!(error, Some(SnapshotError::Io(_))), "{error:?}");
    }

    fn small_snapshot() -> Vec<u8> {
        let mut h = Harness::new();
        h.keyspace = Keyspace::new(2, 9);
        h.set("k", "v");
        h.set_with_expiry("n", "12", START_MS + 50);
        h.context.db = 1;
        h.set("r", &"r".repeat(50));
        to_bytes(&h.keyspace)
    }

    #[test]
    fn every_single_byte_change_is_refused() {
        let data = small_snapshot();
        for index in 0..data.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut damaged = data.clone();
                damaged[index] ^= flip;
                assert!(load(&damaged).is_err(), "byte {index} ^ {flip:#x}");
            }
        }
    }

    #[test]
    fn truncation_and_trailing_bytes_are_refused() {
        let data = small_snapshot();
        for length in 0..data.len() {
            let error = load(&data[..length]).err();
            assert!(
                matches!(error, Some(SnapshotError::Corrupt(_))),
                "length {length}: {error:?}"
            );
        }
        let mut longer = data.clone();
        longer.push(0);
        let error = load(&longer).err();
        assert!(
            matches!(error, Some(SnapshotError::Corrupt(_))),
            "{error:?}"
        );
    }

    /// Replaces the checksum so only the content is judged.
    fn resealed(mut data: Vec<u8>) -> Vec<u8> {
        let checked = data.len() - 8;
        let crc = crc64(0, &data[..checked]);
        data[checked..].copy_from_slice(&crc.to_le_bytes());
        data
    }

    /// The slot index is recorded as a flag and rebuilt on load; a version 1
    /// snapshot (no flags byte) still loads, without an index.
    #[test]
    fn the_slot_index_flag_round_trips_and_version_1_still_loads() {
        let mut keyspace = Keyspace::new(2, 3);
        let mut context = Context::new(START_MS, 1);
        for key in ["{u}a", "{u}b", "foo", "x"] {
            run(&mut keyspace, &mut context, &["SET", key, "v"]);
        }
        let plain = to_bytes(&keyspace);
        assert_eq!(plain[12], 0);
        keyspace.enable_slot_index();
        let indexed = to_bytes(&keyspace);
        assert_eq!(indexed[12], FLAG_SLOT_INDEX);
        let loaded = load(&indexed).unwrap();
        assert!(loaded.has_slot_index());
        assert!(loaded.dbs().iter().all(Db::slot_index_is_exact));
        let slot = cluster::key_slot(b"u");
        assert_eq!(loaded.count_keys_in_slot(0, slot), 2);
        assert_eq!(loaded.keys_in_slot(0, slot, Some(b"{u}a"), 5), ["{u}b"]);
        assert!(loaded.slot_is_empty(1, slot));
        assert!(!load(&plain).unwrap().has_slot_index());

        // The same content in version 1: no flags byte.
        let mut version_1 = indexed[..8].to_vec();
        version_1.extend_from_slice(&1u32.to_le_bytes());
        version_1.extend_from_slice(&indexed[13..]);
        let old = load(&resealed(version_1)).unwrap();
        assert!(!old.has_slot_index());
        assert_same_state_ignoring_index(&loaded, &old);

        let mut unknown_flag = indexed.clone();
        unknown_flag[12] = 0x04;
        assert!(matches!(
            load(&resealed(unknown_flag)),
            Err(SnapshotError::Corrupt(_))
        ));
    }

    /// Slot states are written after the flags, kept by a round trip (with
    /// and without the index) and absent from a snapshot without any.
    #[test]
    fn slot_states_round_trip() {
        let mut seen = Vec::new();
        for seed in [9, 10, 11] {
            let (mut keyspace, now_ms) = random_keyspace(seed);
            let indexed = keyspace.has_slot_index();
            seen.push(indexed);
            let without = to_bytes(&keyspace);
            assert_eq!(without[12], if indexed { FLAG_SLOT_INDEX } else { 0 });
            keyspace.set_slot_state(16383, Some(SlotState::Frozen));
            keyspace.set_slot_state(0, Some(SlotState::Gone));
            keyspace.set_slot_state(300, Some(SlotState::Frozen));
            let dropped_slot = cluster::key_slot(b"k3");
            keyspace.drop_slot(dropped_slot);
            let data = to_bytes(&keyspace);
            let flags = if indexed { FLAG_SLOT_INDEX } else { 0 } | FLAG_SLOT_STATES;
            assert_eq!(data[12], flags);
            let count = keyspace.slot_states().len();
            assert_eq!(data[13] as usize, count);
            assert_eq!(&data[14..17], &[0, 0, STATE_GONE]);
            assert_eq!(
                &data[14 + 3 * (count - 1)..14 + 3 * count],
                &[0xFF, 0x3F, STATE_FROZEN]
            );

            let loaded = load(&data).unwrap();
            assert_eq!(loaded.slot_states(), keyspace.slot_states());
            assert_eq!(loaded.slot_state(dropped_slot), Some(SlotState::Gone));
            assert_eq!(loaded.slot_state(1), None);
            assert_eq!(loaded.has_slot_index(), indexed);
            assert_same_state(&keyspace, &loaded);
            assert_eq!(digest(&loaded, now_ms), digest(&keyspace, now_ms));
            assert_eq!(to_bytes(&loaded), data);
            // Clearing every state writes the bytes of a keyspace that never had any.
            let mut cleared = loaded;
            for slot in [16383, 0, 300, dropped_slot] {
                cleared.set_slot_state(slot, None);
            }
            let mut never = keyspace.clone();
            for slot in [16383, 0, 300, dropped_slot] {
                never.set_slot_state(slot, None);
            }
            assert_eq!(to_bytes(&cleared), to_bytes(&never));
            assert_eq!(
                to_bytes(&cleared)[12],
                if indexed { FLAG_SLOT_INDEX } else { 0 }
            );
        }
        assert!(seen.contains(&true) && seen.contains(&false));
        // A version 2 snapshot written before slot states (flags 0) loads
        // without any.
        assert!(load(&small_snapshot()).unwrap().slot_states().is_empty());
    }

    /// The slot state section refuses an empty or oversized count, slots out of
    /// range or order, and unknown states.
    #[test]
    fn bad_slot_states_are_refused() {
        let mut keyspace = Keyspace::new(1, 3);
        keyspace.set_slot_state(5, Some(SlotState::Frozen));
        keyspace.set_slot_state(9, Some(SlotState::Gone));
        let data = to_bytes(&keyspace);
        assert_eq!(
            &data[12..21],
            &[FLAG_SLOT_STATES, 2, 5, 0, STATE_FROZEN, 9, 0, STATE_GONE, 1]
        );
        assert!(load(&data).is_ok());
        type Edit = fn(&mut Vec<u8>);
        let cases: &[(&str, Edit)] = &[
            ("unknown state 0", |d| d[16] = 0),
            ("unknown state 3", |d| d[19] = 3),
            ("same slot twice", |d| d[17] = 5),
            ("out of order", |d| d[17] = 4),
            ("slot 16384", |d| {
                d[17..19].copy_from_slice(&16384u16.to_le_bytes());
            }),
            // Count 1: the second state is read as the database count.
            ("count too small", |d| d[13] = 1),
            ("count too large", |d| d[13] = 3),
            ("flag without states", |d| {
                d.drain(13..20);
                d.insert(13, 0);
            }),
            ("states without the flag", |d| d[12] = 0),
            ("more than 16384", |d| {
                d.splice(13..14, [0x81, 0x80, 0x01]);
            }),
        ];
        for (what, edit) in cases {
            let mut damaged = data.clone();
            edit(&mut damaged);
            let error = load(&resealed(damaged)).err();
            assert!(
                matches!(error, Some(SnapshotError::Corrupt(_))),
                "{what}: {error:?}"
            );
        }
    }

    fn assert_same_state_ignoring_index(first: &Keyspace, second: &Keyspace) {
        for time in [0, START_MS, u64::MAX] {
            assert_eq!(digest(first, time), digest(second, time));
        }
        for (one, other) in first.dbs().iter().zip(second.dbs()) {
            assert_eq!(one.layout(), other.layout());
        }
    }

    #[test]
    fn magic_and_version_are_checked() {
        let data = small_snapshot();
        let mut wrong_magic = data.clone();
        wrong_magic[..8].copy_from_slice(b"SLRFSNAQ");
        let error = load(&resealed(wrong_magic)).err();
        assert!(
            matches!(error, Some(SnapshotError::Corrupt(_))),
            "{error:?}"
        );
        for version in [0u32, 3, u32::MAX] {
            let mut other = data.clone();
            other[8..12].copy_from_slice(&version.to_le_bytes());
            let error = load(&resealed(other)).err();
            assert!(
                matches!(error, Some(SnapshotError::UnsupportedVersion(found)) if found == version),
                "{error:?}"
            );
        }
        assert!(load(b"").is_err());
        assert!(load(b"SLRFSNAP").is_err());
    }

    /// A snapshot of one database from raw pieces, sealed with a valid checksum.
    fn sealed_db(key_buckets: u64, expire_buckets: u64, entries: &[u8], count: u64) -> Vec<u8> {
        let mut data = MAGIC.to_vec();
        data.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        data.push(0);
        dump::put_length(&mut data, 1);
        dump::put_length(&mut data, 0);
        data.extend_from_slice(&[0u8; 16]);
        dump::put_length(&mut data, key_buckets);
        dump::put_length(&mut data, expire_buckets);
        data.extend_from_slice(&[0u8; 8]);
        dump::put_length(&mut data, count);
        data.extend_from_slice(entries);
        data.push(END_MARKER);
        let crc = crc64(0, &data);
        data.extend_from_slice(&crc.to_le_bytes());
        data
    }

    /// One entry's bytes: key, no TTL, `encoding`, a string body.
    fn entry_bytes(key: &[u8], encoding: u8, value: &[u8]) -> Vec<u8> {
        value_entry_bytes(key, encoding, &Value::string(value))
    }

    /// One entry's bytes: key, no TTL, `encoding`, the body of `value`.
    fn value_entry_bytes(key: &[u8], encoding: u8, value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        dump::put_length(&mut out, key.len() as u64);
        out.extend_from_slice(key);
        out.extend_from_slice(&0u64.to_le_bytes());
        out.push(encoding);
        let body = dump::encode_body(value);
        dump::put_length(&mut out, body.len() as u64);
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn well_sealed_nonsense_is_refused() {
        let one = entry_bytes(b"k", encoding::EMBSTR, b"v");
        // The baseline is fine.
        assert!(load(&sealed_db(4, 0, &one, 1)).is_ok());
        let refused = |data: Vec<u8>, why: &str| {
            let error = load(&data).err();
            assert!(
                matches!(error, Some(SnapshotError::Corrupt(_))),
                "{why}: {error:?}"
            );
        };
        refused(
            sealed_db(4, 0, &[one.clone(), one.clone()].concat(), 2),
            "duplicate key",
        );
        refused(sealed_db(4, 0, &one, 2), "fewer entries than counted");
        refused(
            sealed_db(4, 0, &[one.clone(), one.clone()].concat(), 1),
            "more entries",
        );
        refused(sealed_db(0, 0, &one, 1), "no buckets for a key");
        refused(sealed_db(6, 0, &one, 1), "bucket count not a power of two");
        refused(sealed_db(2, 0, &one, 1), "below the initial size");
        refused(sealed_db(1 << 40, 0, &one, 1), "absurd bucket count");
        refused(sealed_db(4, 4 << 20, &one, 1), "absurd expiry table");
        refused(
            sealed_db(4, 0, &entry_bytes(b"k", 7, b"v"), 1),
            "unknown encoding",
        );
        refused(
            sealed_db(4, 0, &entry_bytes(b"k", encoding::INT, b"v"), 1),
            "int of text",
        );
        refused(
            sealed_db(4, 0, &entry_bytes(b"k", encoding::EMBSTR, &[b'e'; 45]), 1),
            "long embstr",
        );
        let list = Value::list(["a", "b"]);
        for tag in [encoding::LISTPACK, encoding::QUICKLIST] {
            let entry = value_entry_bytes(b"k", tag, &list);
            assert!(load(&sealed_db(4, 0, &entry, 1)).is_ok());
        }
        refused(
            sealed_db(4, 0, &value_entry_bytes(b"k", encoding::RAW, &list), 1),
            "a list with a string encoding",
        );
        refused(
            sealed_db(4, 0, &entry_bytes(b"k", encoding::LISTPACK, b"v"), 1),
            "a string with a list encoding",
        );
        let zset = Value::zset([(1.0, "a"), (2.0, "b")]);
        for tag in [encoding::ZSET_LISTPACK, encoding::ZSET_SKIPLIST] {
            let entry = value_entry_bytes(b"k", tag, &zset);
            assert!(load(&sealed_db(4, 0, &entry, 1)).is_ok());
        }
        let large = Value::zset((0..200).map(|index| (f64::from(index), index.to_string())));
        refused(
            sealed_db(
                4,
                0,
                &value_entry_bytes(b"k", encoding::ZSET_LISTPACK, &large),
                1,
            ),
            "a listpack sorted set past the listpack limits",
        );
        refused(
            sealed_db(4, 0, &value_entry_bytes(b"k", encoding::LISTPACK, &zset), 1),
            "a sorted set with a list encoding",
        );
        refused(
            sealed_db(4, 0, &entry_bytes(b"k", encoding::ZSET_SKIPLIST, b"v"), 1),
            "a string with a sorted set encoding",
        );
        let mut bad_type = one.clone();
        let type_position = bad_type.len() - 3;
        bad_type[type_position] = 200;
        refused(sealed_db(4, 0, &bad_type, 1), "unknown value type");

        // Databases out of sequence, none at all, a bad end marker.
        let mut data = sealed_db(4, 0, &one, 1);
        data[14] = 1;
        refused(resealed(data), "database 1 first");
        let mut data = sealed_db(4, 0, &one, 1);
        data[13] = 0;
        refused(resealed(data), "no databases");
        let mut data = sealed_db(4, 0, &one, 1);
        let marker = data.len() - 9;
        data[marker] = 0xFE;
        refused(resealed(data), "bad end marker");
    }

    #[test]
    fn huge_claimed_lengths_allocate_nothing_up_front() {
        // A key length of 4 GiB and a key count of 2^60 with a few bytes behind
        // them: refused as truncated, without trying to allocate.
        let mut entry = Vec::new();
        dump::put_length(&mut entry, 1 << 32);
        entry.extend_from_slice(b"abc");
        refused_quickly(sealed_db(4, 0, &entry, 1));
        refused_quickly(sealed_db(4, 0, &entry_bytes(b"k", 1, b"v"), 1 << 60));
        let mut entry = Vec::new();
        dump::put_length(&mut entry, 1);
        entry.push(b'k');
        entry.extend_from_slice(&0u64.to_le_bytes());
        entry.push(encoding::EMBSTR);
        dump::put_length(&mut entry, 1 << 39);
        entry.extend_from_slice(b"\x00\x01v");
        refused_quickly(sealed_db(4, 0, &entry, 1));
        let mut many_databases = MAGIC.to_vec();
        many_databases.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        many_databases.push(0);
        dump::put_length(&mut many_databases, 1 << 19);
        refused_quickly(many_databases);
    }

    fn refused_quickly(data: Vec<u8>) {
        let error = load(&data).err();
        assert!(
            matches!(error, Some(SnapshotError::Corrupt(_))),
            "{error:?}"
        );
    }

    #[test]
    fn errors_display() {
        assert_eq!(
            SnapshotError::UnsupportedVersion(9).to_string(),
            "unsupported snapshot format version 9 (this build reads 1 to 2)"
        );
        assert_eq!(
            SnapshotError::Corrupt("checksum mismatch".into()).to_string(),
            "corrupt snapshot: checksum mismatch"
        );
        assert!(SnapshotError::Io(io::Error::other("gone"))
            .to_string()
            .contains("gone"));
    }

    proptest! {
        #[test]
        fn random_keyspaces_round_trip(seed in any::<u64>()) {
            assert_round_trip(seed);
        }

        /// A clone (the snapshot's copy step, copy-on-write) writes exactly
        /// what the keyspace held when it was taken, however the keyspace
        /// changes afterwards: writes in place, new keys that grow the tables,
        /// deletions that shrink them, whole databases flushed.
        #[test]
        fn a_clone_keeps_its_moment(seed in any::<u64>()) {
            let (mut keyspace, _) = random_keyspace(seed);
            let before = to_bytes(&keyspace);
            let copy = keyspace.clone();
            let mut rng = Rng::new(seed ^ 0x5eed);
            let mut context = Context::new(START_MS + 5, rng.next_u64());
            for db in 0..keyspace.dbs().len() {
                context.db = db;
                let keys: Vec<String> = keyspace.dbs()[db]
                    .entries()
                    .map(|(key, _)| String::from_utf8_lossy(key).into_owned())
                    .collect();
                for key in &keys {
                    let words: &[&str] = match rng.below(6) {
                        0 => &["APPEND", key, "+"],
                        1 => &["DEL", key],
                        2 => &["PEXPIRE", key, "100000"],
                        3 => &["HSET", key, "f", "changed"],
                        4 => &["SADD", key, "new-member"],
                        _ => &["LPUSH", key, "new-element"],
                    };
                    run(&mut keyspace, &mut context, words);
                }
                for index in 0..rng.below(3000) {
                    run(&mut keyspace, &mut context, &["SET", &format!("new{index}"), "v"]);
                }
                if rng.below(3) == 0 {
                    run(&mut keyspace, &mut context, &["FLUSHDB"]);
                }
            }
            // Some change always follows the copy, even when the random steps
            // above changed nothing (an empty keyspace, flushed again).
            context.db = 0;
            run(&mut keyspace, &mut context, &["SET", "written-after-the-copy", "v"]);
            prop_assert_ne!(to_bytes(&keyspace), before.clone());
            prop_assert_eq!(to_bytes(&copy), before);
        }

        #[test]
        fn random_damage_is_refused(
            seed in 0u64..8,
            changes in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let (original, _) = random_keyspace(seed);
            let data = to_bytes(&original);
            let mut damaged = data.clone();
            for (index, flip) in &changes {
                damaged[index.index(data.len())] ^= flip;
            }
            prop_assume!(damaged != data);
            prop_assert!(load(&damaged).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = load(&tail);
            let mut data = MAGIC.to_vec();
            data.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            data.extend_from_slice(&tail);
            prop_assert!(load(&data).is_err());
        }
    }
}
