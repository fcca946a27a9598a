//! One database: keys with their values, expiry times and access data, plus the set
//! of keys that carry a TTL (for active expiry). Every method that might observe an
//! expired key takes `now_ms` from the caller; nothing here reads a clock.
//!
//! **Architecture Invariant:** a key whose expiry time is in the past (`now_ms >
//! expire_at_ms`, strictly, as Redis) is never returned; the lookup that finds it
//! deletes it (lazy expiry), and [`Db::active_expire_cycle`] reclaims the ones nobody
//! touches. [`Db::get_mut_live`], [`Db::peek`] and [`Db::random_key_live`] skip
//! expired keys without deleting them, for reads that must not change replicated
//! state.

use crate::dict::{Dict, Lookup};
use crate::rng::Rng;
use crate::slot_changes::SlotChanges;
use crate::slot_index::SlotIndex;
use crate::value::Value;
use bytes::Bytes;

/// A stored key's data.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: Value,
    /// Absolute expiry time in Unix milliseconds; 0 means none.
    expire_at_ms: u64,
    /// Last access in LRU mode (Unix seconds, truncated), or LFU data in LFU mode
    /// (high 16 bits: minutes of the last decay; low 8 bits: logarithmic counter).
    pub access: u32,
}

impl Entry {
    pub fn new(value: Value) -> Self {
        Entry {
            value,
            expire_at_ms: 0,
            access: 0,
        }
    }

    pub fn expire_at_ms(&self) -> Option<u64> {
        (self.expire_at_ms != 0).then_some(self.expire_at_ms)
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at_ms != 0 && now_ms > self.expire_at_ms
    }
}

/// See [`Db::layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbLayout {
    /// Buckets of the key table.
    pub key_buckets: u64,
    /// Buckets of the table of keys with a TTL.
    pub expire_buckets: u64,
    /// Where the next active-expiry step resumes.
    pub expire_cursor: u64,
}

/// Keys examined per active-expiry step, as Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP.
const ACTIVE_EXPIRE_KEYS_PER_STEP: usize = 20;
/// Keep going while more than this percentage of the examined keys had expired.
const ACTIVE_EXPIRE_ACCEPTABLE_STALE_PERCENT: usize = 10;

/// Cloning copies the tables exactly (layout included) and the expiry cursor, so a
/// clone behaves as the original under the same commands.
#[derive(Clone)]
pub struct Db {
    keys: Dict<Entry>,
    /// Keys that have an expiry time, for active expiry.
    expires: Dict<()>,
    /// Where the next active-expiry step resumes scanning `expires`.
    expire_cursor: u64,
    /// Keys deleted because they expired (lazy or active), since creation.
    pub expired_keys: u64,
    /// The per-slot key index, when enabled (see [`Db::enable_slot_index`]).
    slots: Option<SlotIndex>,
    /// Keys deleted by expiry since the last [`Db::take_expired`], kept only
    /// while keyspace notifications are on (not replicated state).
    expired_log: Option<Vec<Bytes>>,
    /// Streams deleted by expiry since the last [`Db::take_gone_streams`],
    /// kept only while the keyspace tracks ready keys (a client may be
    /// blocked in XREADGROUP on one, and must run again).
    gone_streams: Option<Vec<Bytes>>,
    /// The keys changed in slots being copied away (see
    /// [`crate::slot_changes`]); noted by every method that may change a key.
    changes: SlotChanges,
}

/// A key and its value's estimated bytes (a sample of an aggregate's
/// elements), for counting what a snapshot holds.
fn entry_bytes(key: &[u8], entry: &Entry) -> usize {
    crate::commands::memory::key_bytes(key, &entry.value, 5)
}

/// An expiry record's key.
fn expiry_bytes(key: &[u8], _: &()) -> usize {
    key.len()
}

impl Db {
    pub fn new(hash_key: (u64, u64)) -> Self {
        Db {
            keys: Dict::with_sizer(hash_key, entry_bytes),
            expires: Dict::with_sizer((hash_key.1, hash_key.0), expiry_bytes),
            expire_cursor: 0,
            expired_keys: 0,
            slots: None,
            expired_log: None,
            gone_streams: None,
            changes: SlotChanges::default(),
        }
    }

    /// A clone for a snapshot: the tables' pages this database copies on
    /// writes while the clone lives count in [`Db::snapshot_copy_bytes`].
    pub fn clone_tracked(&mut self) -> Db {
        Db {
            keys: self.keys.clone_tracked(),
            expires: self.expires.clone_tracked(),
            expire_cursor: self.expire_cursor,
            expired_keys: self.expired_keys,
            slots: self.slots.as_mut().map(SlotIndex::clone_tracked),
            expired_log: self.expired_log.clone(),
            gone_streams: self.gone_streams.clone(),
            changes: SlotChanges::default(),
        }
    }

    /// Estimated bytes this database copied from pages a tracked clone
    /// still holds (see [`Dict::clone_tracked`]).
    pub fn snapshot_copy_bytes(&self) -> u64 {
        self.keys.snapshot_copy_bytes()
            + self.expires.snapshot_copy_bytes()
            + self
                .slots
                .as_ref()
                .map_or(0, SlotIndex::snapshot_copy_bytes)
    }

    /// Starts or stops recording the keys expiry deletes (for `expired`
    /// keyspace events).
    pub fn record_expired(&mut self, on: bool) {
        match (on, &self.expired_log) {
            (true, None) => self.expired_log = Some(Vec::new()),
            (false, Some(_)) => self.expired_log = None,
            _ => {}
        }
    }

    /// The keys expiry deleted since the last call (empty unless recording).
    pub fn take_expired(&mut self) -> Vec<Bytes> {
        match &mut self.expired_log {
            Some(log) if !log.is_empty() => std::mem::take(log),
            _ => Vec::new(),
        }
    }

    /// Starts or stops recording the streams expiry deletes.
    pub fn record_gone_streams(&mut self, on: bool) {
        match (on, &self.gone_streams) {
            (true, None) => self.gone_streams = Some(Vec::new()),
            (false, Some(_)) => self.gone_streams = None,
            _ => {}
        }
    }

    /// The streams expiry deleted since the last call (empty unless
    /// recording).
    pub fn take_gone_streams(&mut self) -> Vec<Bytes> {
        match &mut self.gone_streams {
            Some(log) if !log.is_empty() => std::mem::take(log),
            _ => Vec::new(),
        }
    }

    fn note_gone_stream(&mut self, key: &[u8], entry: &Entry) {
        if let Some(log) = &mut self.gone_streams {
            if matches!(entry.value, Value::Stream(_)) {
                log.push(Bytes::copy_from_slice(key));
            }
        }
    }

    /// Deletes a key found expired: counts and logs its expiry.
    pub fn remove_expired(&mut self, key: &[u8]) {
        if let Some(entry) = self.remove(key) {
            self.expired_keys += 1;
            self.log_expired(key);
            self.note_gone_stream(key, &entry);
        }
    }

    fn log_expired(&mut self, key: &[u8]) {
        if let Some(log) = &mut self.expired_log {
            log.push(Bytes::copy_from_slice(key));
        }
    }

    /// Starts keeping the per-slot key index (built from the keys stored now);
    /// from then on every insertion and removal keeps it exact.
    pub fn enable_slot_index(&mut self) {
        if self.slots.is_none() {
            self.slots = Some(SlotIndex::from_keys(self.keys.iter().map(|(key, _)| key)));
        }
    }

    pub fn has_slot_index(&self) -> bool {
        self.slots.is_some()
    }

    /// Stored keys in hash slot `slot` (expired ones not reclaimed yet included,
    /// as DBSIZE counts them). O(1) with the slot index, a full pass without.
    pub fn count_keys_in_slot(&self, slot: u16) -> usize {
        match &self.slots {
            Some(index) => index.count(slot),
            None => self
                .keys
                .iter()
                .filter(|(key, _)| cluster::key_slot(key) == slot)
                .count(),
        }
    }

    /// Up to `count` stored keys of hash slot `slot` in byte order, starting
    /// after `after`: pass the last key of one batch to get the next. O(log N +
    /// count) with the slot index, a full pass and a sort without.
    pub fn keys_in_slot(&self, slot: u16, after: Option<&[u8]>, count: usize) -> Vec<Bytes> {
        if let Some(index) = &self.slots {
            return index.keys(slot, after, count);
        }
        let mut keys: Vec<&[u8]> = self
            .keys
            .iter()
            .map(|(key, _)| key)
            .filter(|key| cluster::key_slot(key) == slot)
            .filter(|key| after.is_none_or(|after| *key > after))
            .collect();
        keys.sort_unstable();
        keys.into_iter()
            .take(count)
            .map(Bytes::copy_from_slice)
            .collect()
    }

    /// Whether the slot index (if any) holds exactly the stored keys; a check for
    /// tests and debug assertions, it rebuilds the index from the table.
    pub fn slot_index_is_exact(&self) -> bool {
        self.slots
            .as_ref()
            .is_none_or(|index| index.matches(self.keys.iter().map(|(key, _)| key)))
    }

    /// Starts recording the keys changed in `slot` (see
    /// [`crate::slot_changes`]); true when it starts afresh.
    pub fn track_slot_changes(&mut self, slot: u16) -> bool {
        self.changes.track(slot)
    }

    /// Stops recording `slot`'s changes.
    pub fn forget_slot_changes(&mut self, slot: u16) {
        self.changes.forget(slot);
    }

    /// Up to `count` keys changed in `slot` since it was tracked, in byte
    /// order after `after`; None when its changes are unknown.
    pub fn slot_changes(
        &self,
        slot: u16,
        after: Option<&[u8]>,
        count: usize,
    ) -> Option<Vec<Bytes>> {
        self.changes.keys(slot, after, count)
    }

    fn index_insert(&mut self, key: &[u8]) {
        if let Some(index) = &mut self.slots {
            index.insert(key);
        }
    }

    fn index_remove(&mut self, key: &[u8]) {
        if let Some(index) = &mut self.slots {
            index.remove(key);
        }
    }

    /// Keys stored, including expired ones not reclaimed yet (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Keys that carry an expiry time.
    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// Looks a key up for reading or writing; an expired key is deleted and absent.
    pub fn get_mut(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.changes.note(key);
        match self
            .keys
            .get_mut_unless(key, |entry| entry.is_expired(now_ms))
        {
            Lookup::Found(entry) => Some(entry),
            Lookup::Removed(entry) => {
                if let (Some(log), Value::Stream(_)) = (&mut self.gone_streams, &entry.value) {
                    log.push(Bytes::copy_from_slice(key));
                }
                self.expires.remove(key);
                if let Some(index) = &mut self.slots {
                    index.remove(key);
                }
                self.expired_keys += 1;
                if let Some(log) = &mut self.expired_log {
                    log.push(Bytes::copy_from_slice(key));
                }
                None
            }
            Lookup::Missing => None,
        }
    }

    /// Looks a key up without deleting it: an expired key reads as absent but
    /// stays until a write or expiry through the log removes it.
    pub fn get_mut_live(&mut self, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        self.changes.note(key);
        self.keys
            .get_mut(key)
            .filter(|entry| !entry.is_expired(now_ms))
    }

    /// See [`Dict::prefetch`].
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        self.keys.prefetch(keys);
    }

    /// Looks a key up for reading; an expired key is deleted and absent.
    pub fn get(&mut self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.get_mut(key, now_ms).map(|entry| &*entry)
    }

    /// A stored key drawn at random (expired or not), for eviction sampling.
    pub fn random_stored_key(&self, rng: &mut Rng) -> Option<Vec<u8>> {
        self.keys
            .random_entry(|| rng.next_u64())
            .map(|(key, _)| key.to_vec())
    }

    /// A key with a TTL drawn at random, for the volatile eviction policies.
    pub fn random_volatile_key(&self, rng: &mut Rng) -> Option<Vec<u8>> {
        self.expires
            .random_entry(|| rng.next_u64())
            .map(|(key, _)| key.to_vec())
    }

    /// A stored entry, expired or not, without changing anything.
    pub fn peek_stored(&self, key: &[u8]) -> Option<&Entry> {
        self.keys.get(key)
    }

    /// Looks a key up without changing anything; expired keys read as absent.
    pub fn peek(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.keys.get(key).filter(|entry| !entry.is_expired(now_ms))
    }

    pub fn contains(&mut self, key: &[u8], now_ms: u64) -> bool {
        self.get(key, now_ms).is_some()
    }

    /// Stores `value` under `key`, replacing any old value and its TTL; sets the TTL
    /// to `expire_at_ms` when given, and the access data to `access`. Returns the
    /// replaced entry, expired or not.
    pub fn set(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at_ms: Option<u64>,
        access: u32,
    ) -> Option<Entry> {
        self.changes.note(key);
        let mut entry = Entry::new(value);
        entry.expire_at_ms = expire_at_ms.unwrap_or(0);
        entry.access = access;
        match self.keys.get_mut(key) {
            Some(old) => {
                let had_ttl = old.expire_at_ms != 0;
                let replaced = std::mem::replace(old, entry);
                match (had_ttl, expire_at_ms.is_some()) {
                    (true, false) => {
                        self.expires.remove(key);
                    }
                    (false, true) => self.expires.insert_new(key, ()),
                    _ => {}
                }
                Some(replaced)
            }
            None => {
                self.keys.insert_new(key, entry);
                if expire_at_ms.is_some() {
                    self.expires.insert_new(key, ());
                }
                self.index_insert(key);
                None
            }
        }
    }

    /// Replaces the value of a key, keeping its TTL (KEEPTTL, in-place updates).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value, access: u32) {
        self.changes.note(key);
        match self.keys.get_mut(key) {
            Some(old) => {
                old.value = value;
                old.access = access;
            }
            None => {
                let mut entry = Entry::new(value);
                entry.access = access;
                self.keys.insert_new(key, entry);
                self.index_insert(key);
            }
        }
    }

    /// Inserts a whole entry (RENAME, MOVE, COPY, RESTORE), replacing any old one.
    pub fn insert_entry(&mut self, key: &[u8], entry: Entry) {
        let expire_at_ms = entry.expire_at_ms();
        self.set(key, entry.value, expire_at_ms, entry.access);
    }

    /// Deletes a key (expired or not); returns its entry.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.changes.note(key);
        let entry = self.keys.remove(key)?;
        if entry.expire_at_ms != 0 {
            self.expires.remove(key);
        }
        self.index_remove(key);
        Some(entry)
    }

    /// Sets the expiry time of an existing key; false when the key is absent.
    pub fn set_expire(&mut self, key: &[u8], expire_at_ms: u64) -> bool {
        debug_assert!(expire_at_ms != 0);
        self.changes.note(key);
        let Some(entry) = self.keys.get_mut(key) else {
            return false;
        };
        let had_ttl = entry.expire_at_ms != 0;
        entry.expire_at_ms = expire_at_ms;
        if !had_ttl {
            self.expires.insert_new(key, ());
        }
        true
    }

    /// Removes the TTL of a key; true when there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        self.changes.note(key);
        let Some(entry) = self.keys.get_mut(key) else {
            return false;
        };
        if entry.expire_at_ms == 0 {
            return false;
        }
        entry.expire_at_ms = 0;
        self.expires.remove(key);
        true
    }

    /// Deletes every key.
    pub fn clear(&mut self) {
        self.changes.forget_all();
        self.keys.clear();
        self.expires.clear();
        self.expire_cursor = 0;
        if let Some(index) = &mut self.slots {
            index.clear();
        }
    }

    /// One SCAN step over the keys (see [`Dict::scan`]); expired keys are skipped.
    pub fn scan(
        &self,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut visit: impl FnMut(&[u8], &Entry),
    ) -> u64 {
        let max_buckets = count.saturating_mul(10).max(10);
        self.keys.scan(cursor, count, max_buckets, |key, entry| {
            if !entry.is_expired(now_ms) {
                visit(key, entry)
            }
        })
    }

    /// Every stored key and entry, expired or not, in table order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.keys.iter()
    }

    /// The hash key of the key table (the table of keys with a TTL uses it with its
    /// halves swapped, see [`Db::new`]).
    pub fn hash_key(&self) -> (u64, u64) {
        self.keys.hash_key()
    }

    /// What besides the entries decides how this database behaves: table sizes
    /// (they depend on history, not only on the key count) and where active expiry
    /// resumes.
    pub fn layout(&self) -> DbLayout {
        DbLayout {
            key_buckets: self.keys.bucket_count() as u64,
            expire_buckets: self.expires.bucket_count() as u64,
            expire_cursor: self.expire_cursor,
        }
    }

    /// Adds an entry while rebuilding a database from a snapshot, in the original's
    /// table order; errors on a duplicate key.
    pub(crate) fn restore_entry(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at_ms: Option<u64>,
        access: u32,
    ) -> Result<(), String> {
        if self.keys.contains_key(key) {
            return Err(format!("duplicate key {:?}", String::from_utf8_lossy(key)));
        }
        let mut entry = Entry::new(value);
        entry.expire_at_ms = expire_at_ms.unwrap_or(0);
        entry.access = access;
        self.keys.push_back_new(key, entry);
        if expire_at_ms.is_some() {
            self.expires.push_back_new(key, ());
        }
        self.index_insert(key);
        Ok(())
    }

    /// Finishes a rebuild: gives the tables the original's sizes (and with them,
    /// for the key table, its exact layout) and sets the expiry cursor.
    pub(crate) fn restore_layout(&mut self, layout: DbLayout) -> Result<(), String> {
        self.keys
            .restore_bucket_count(layout.key_buckets)
            .map_err(|error| format!("key table: {error}"))?;
        self.expires
            .restore_bucket_count(layout.expire_buckets)
            .map_err(|error| format!("expiry table: {error}"))?;
        self.expire_cursor = layout.expire_cursor;
        Ok(())
    }

    /// Every live key and entry, in table order.
    pub fn iter(&self, now_ms: u64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.keys
            .iter()
            .filter(move |(_, entry)| !entry.is_expired(now_ms))
    }

    /// A random live key, deleting expired keys it happens upon (bounded tries,
    /// like Redis's RANDOMKEY).
    pub fn random_key(&mut self, now_ms: u64, rng: &mut Rng) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let (key, entry) = self.keys.random_entry(|| rng.next_u64())?;
            if !entry.is_expired(now_ms) {
                return Some(key.to_vec());
            }
            let key = key.to_vec();
            self.remove_expired(&key);
        }
        // Every try hit an expired key: answer with one more pick, as Redis does
        // when all keys have a TTL, after reclaiming what we could.
        self.keys
            .random_entry(|| rng.next_u64())
            .map(|(key, _)| key.to_vec())
    }

    /// A random live key without deleting anything: up to 100 fair picks, then (when
    /// they all hit expired keys) a uniform pick among the live keys by a full
    /// pass. None when no key is live.
    pub fn random_key_live(&self, now_ms: u64, rng: &mut Rng) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let (key, entry) = self.keys.random_entry(|| rng.next_u64())?;
            if !entry.is_expired(now_ms) {
                return Some(key.to_vec());
            }
        }
        let live = self.iter(now_ms).count();
        if live == 0 {
            return None;
        }
        let chosen = rng.below(live as u64) as usize;
        self.iter(now_ms).nth(chosen).map(|(key, _)| key.to_vec())
    }

    /// One active-expiry pass: examines keys with a TTL in scan order, deletes the
    /// expired ones, and keeps going while more than 10% of a step had expired, up
    /// to `max_steps` steps. Returns the number of keys deleted.
    pub fn active_expire_cycle(&mut self, now_ms: u64, max_steps: usize) -> usize {
        let mut deleted = 0;
        for _ in 0..max_steps {
            if self.expires.is_empty() {
                self.expire_cursor = 0;
                break;
            }
            let mut examined = 0;
            let mut expired_keys: Vec<Box<[u8]>> = Vec::new();
            let keys = &self.keys;
            self.expire_cursor = self.expires.scan(
                self.expire_cursor,
                ACTIVE_EXPIRE_KEYS_PER_STEP,
                ACTIVE_EXPIRE_KEYS_PER_STEP * 20,
                |key, ()| {
                    examined += 1;
                    if keys.get(key).is_some_and(|entry| entry.is_expired(now_ms)) {
                        expired_keys.push(key.into());
                    }
                },
            );
            let expired_now = expired_keys.len();
            for key in expired_keys {
                if let Some(entry) = self.remove(&key) {
                    self.note_gone_stream(&key, &entry);
                }
                self.log_expired(&key);
            }
            self.expired_keys += expired_now as u64;
            deleted += expired_now;
            if examined == 0
                || expired_now * 100 <= examined * ACTIVE_EXPIRE_ACCEPTABLE_STALE_PERCENT
            {
                break;
            }
        }
        deleted
    }

    /// Sum of remaining TTLs and count of keys examined, for INFO's `avg_ttl`.
    pub fn ttl_sample(&self, now_ms: u64, limit: usize) -> (u64, u64) {
        let mut total = 0u64;
        let mut counted = 0u64;
        for (key, ()) in self.expires.iter().take(limit) {
            if let Some(at) = self.keys.get(key).and_then(Entry::expire_at_ms) {
                total += at.saturating_sub(now_ms);
                counted += 1;
            }
        }
        (total, counted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Db {
        Db::new((11, 22))
    }

    #[test]
    fn lazy_expiry_deletes_on_access() {
        let mut db = db();
        db.set(b"k", Value::string("v"), Some(1000), 0);
        assert!(
            db.get(b"k", 1000).is_some(),
            "alive at exactly its expiry time"
        );
        assert!(db.get(b"k", 1001).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires_len(), 0);
        assert_eq!(db.expired_keys, 1);
    }

    #[test]
    fn active_expiry_reclaims_untouched_keys() {
        let mut db = db();
        for index in 0..1000 {
            let key = format!("k{index}");
            let expire = if index % 2 == 0 { Some(500) } else { None };
            db.set(key.as_bytes(), Value::string("v"), expire, 0);
        }
        assert_eq!(db.expires_len(), 500);
        let mut cycles = 0;
        while db.expires_len() > 0 && cycles < 1000 {
            db.active_expire_cycle(501, 16);
            cycles += 1;
        }
        assert_eq!(db.expires_len(), 0);
        assert_eq!(db.len(), 500);
        assert_eq!(db.expired_keys, 500);
    }

    /// Every path that may change a key of a tracked slot records it:
    /// writes, deletes, expiry times, lazy and active expiry, flushes
    /// (which forget the record: the changes are then unknown).
    #[test]
    fn every_change_in_a_tracked_slot_is_recorded() {
        let mut db = db();
        let keys: Vec<String> = (0..8).map(|index| format!("{{t}}{index}")).collect();
        let slot = cluster::key_slot(b"t");
        for key in &keys {
            db.set(key.as_bytes(), Value::string("v"), Some(1000), 0);
        }
        db.set(b"elsewhere", Value::string("v"), None, 0);
        assert!(db.track_slot_changes(slot));
        assert_eq!(db.slot_changes(slot, None, 100), Some(Vec::new()));
        db.set(keys[0].as_bytes(), Value::string("w"), None, 0);
        db.set_keep_ttl(keys[1].as_bytes(), Value::string("w"), 0);
        db.remove(keys[2].as_bytes());
        db.set_expire(keys[3].as_bytes(), 2000);
        db.persist(keys[4].as_bytes());
        if let Some(entry) = db.get_mut(keys[5].as_bytes(), 10) {
            entry.value = Value::string("w");
        }
        // Lazy expiry, then active expiry of the rest.
        assert!(db.get_mut(keys[6].as_bytes(), 1001).is_none());
        db.active_expire_cycle(1001, 16);
        db.set(b"{t}new", Value::string("v"), None, 0);
        db.remove(b"elsewhere");
        let recorded = db.slot_changes(slot, None, 100).unwrap();
        let mut expected: Vec<&[u8]> = keys.iter().map(|key| key.as_bytes()).collect();
        expected.push(b"{t}new");
        expected.sort();
        assert_eq!(recorded, expected);
        assert_eq!(
            db.slot_changes(slot, Some(b"{t}6"), 100).unwrap(),
            [&b"{t}7"[..], b"{t}new"]
        );
        assert_eq!(db.clone_tracked().slot_changes(slot, None, 100), None);
        db.clear();
        assert_eq!(db.slot_changes(slot, None, 100), None);
    }

    /// Every path that adds or removes a key keeps the slot index exact.
    #[test]
    fn the_slot_index_follows_every_insertion_and_removal() {
        let mut db = db();
        db.set(b"before", Value::string("v"), None, 0);
        db.enable_slot_index();
        assert!(db.slot_index_is_exact());
        let slot = cluster::key_slot(b"u");
        for index in 0..50 {
            let key = format!("{{u}}{index:02}");
            let expire = (index % 2 == 0).then_some(100);
            db.set(key.as_bytes(), Value::string("v"), expire, 0);
        }
        db.set(b"{u}00", Value::string("again"), None, 0);
        db.set_keep_ttl(b"{u}kept", Value::string("v"), 0);
        db.insert_entry(b"{u}entry", Entry::new(Value::string("v")));
        assert!(db.slot_index_is_exact());
        assert_eq!(db.count_keys_in_slot(slot), 52);
        // Lazy expiry, a random pick that reclaims, active expiry.
        assert!(db.get(b"{u}02", 101).is_none());
        let mut rng = Rng::new(5);
        db.random_key(101, &mut rng);
        assert!(db.slot_index_is_exact());
        while db.active_expire_cycle(101, 16) > 0 {}
        assert!(db.slot_index_is_exact());
        assert_eq!(db.count_keys_in_slot(slot), 28);
        let first = db.keys_in_slot(slot, None, 3);
        assert_eq!(first, ["{u}00", "{u}01", "{u}03"]);
        let next = db.keys_in_slot(slot, Some(&first[2]), 2);
        assert_eq!(next, ["{u}05", "{u}07"]);
        assert!(db.remove(b"{u}01").is_some());
        assert!(db.slot_index_is_exact());
        db.clear();
        assert!(db.slot_index_is_exact());
        assert_eq!(db.count_keys_in_slot(slot), 0);
        assert!(db.keys_in_slot(slot, None, 10).is_empty());
    }

    #[test]
    fn set_and_persist_track_the_expires_set() {
        let mut db = db();
        db.set(b"a", Value::string("1"), Some(10), 0);
        db.set(b"a", Value::string("2"), None, 0);
        assert_eq!(db.expires_len(), 0);
        assert!(db.set_expire(b"a", 50));
        assert!(db.persist(b"a"));
        assert!(!db.persist(b"a"));
        assert!(db.set_expire(b"a", 50));
        db.remove(b"a");
        assert_eq!(db.expires_len(), 0);
    }
}
