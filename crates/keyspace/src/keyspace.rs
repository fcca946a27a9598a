//! The keyspace: the databases, statistics, and the context every command runs in.

use crate::db::{Db, Entry};
use crate::rng::Rng;
use crate::scripts::{EngineSlot, ScriptStore, ScriptingSetup};
use crate::value::Value;
use bytes::Bytes;
use resp::Protocol;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a blocking command (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, the BZPOP
/// family, XREAD and XREADGROUP with BLOCK) waits for
/// when it could not be served at once. The keyspace never waits: the command
/// replies with its timeout reply and records this in [`Context::block`]; the
/// node holds the client, and runs the same command again when one of `keys`
/// is reported ready ([`Keyspace::take_ready_keys`]) or answers the timeout
/// reply once `timeout_ms` has passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockOn {
    /// The database the keys are in.
    pub db: usize,
    /// The keys to wait for, in the command's order, each once.
    pub keys: Vec<Bytes>,
    /// How long to wait, in milliseconds (the command's seconds, rounded up);
    /// 0 waits forever.
    pub timeout_ms: u64,
    /// The arguments to run again instead of the command's own, when what
    /// they mean must not change while the client waits (XREAD's `$` is
    /// replaced by the last ID it stood for when the client blocked).
    pub arguments: Option<Vec<Bytes>>,
}

/// Most keys remembered as ready between two [`Keyspace::take_ready_keys`]
/// calls. A node drains the set after every batch, so it holds at most what one
/// batch touched; the bound only matters to a caller that never drains.
pub const MAX_READY_KEYS: usize = 1 << 20;

/// Everything a command may know about the world, supplied by the caller: the time
/// (the log entry's stamp), a seeded random source, the selected database and the
/// client's protocol. Commands never look anywhere else.
#[derive(Debug, Clone)]
pub struct Context {
    /// Current time in Unix milliseconds.
    pub now_ms: u64,
    pub rng: Rng,
    /// Index of the selected database.
    pub db: usize,
    pub protocol: Protocol,
    /// Cluster mode: one database, MOVE and SWAPDB refused.
    pub cluster_mode: bool,
    /// Whether lookups delete the expired keys they meet (lazy expiry; true for a
    /// standalone server and for entries applied from the log). A replicated read
    /// runs on one replica outside the log and must not change replicated state:
    /// with `false`, expired keys read as absent and stay until a write or an
    /// expiry entry removes them on every replica alike (only the replica-local
    /// access data and hit/miss counters change). Write commands always expire
    /// lazily: [`Keyspace::execute`] turns this on while one runs.
    pub lazy_expire: bool,
    /// Set by a blocking command that found nothing to serve (see [`BlockOn`]);
    /// [`Keyspace::execute`] clears it before every command, so after a call it
    /// describes that command alone.
    pub block: Option<BlockOn>,
    /// Memory was over `maxmemory` with nothing left to evict when this ran
    /// (Redis's pre-command OOM state): a script without a shebang fails its
    /// first write that may grow memory. Part of the entry on replicas, so
    /// every replica decides alike.
    pub out_of_memory: bool,
    /// A script is calling: replies must not depend on anything a replica's
    /// copy may lay out differently (ZSCAN of a skiplist answers in one step).
    pub in_script: bool,
    /// CLIENT NO-TOUCH: lookups leave keys' LRU/LFU access data alone (TOUCH
    /// itself still touches).
    pub no_touch: bool,
}

impl Context {
    pub fn new(now_ms: u64, seed: u64) -> Self {
        Context {
            now_ms,
            rng: Rng::new(seed),
            db: 0,
            protocol: Protocol::Resp2,
            cluster_mode: false,
            lazy_expire: true,
            block: None,
            out_of_memory: false,
            in_script: false,
            no_touch: false,
        }
    }

    pub fn now_seconds(&self) -> u64 {
        self.now_ms / 1000
    }
}

/// Settings that change what commands do; the node maps CONFIG SET onto these.
#[derive(Debug, Clone)]
pub struct KeyspaceConfig {
    /// `proto-max-bulk-len`: the largest string a command may build.
    pub max_string_bytes: usize,
    /// True when `maxmemory-policy` is an LFU policy (OBJECT FREQ works, IDLETIME not).
    pub lfu: bool,
    /// `lfu-log-factor`.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time` in minutes.
    pub lfu_decay_time_minutes: u32,
    /// A shard of a cluster: whoever builds a [`Context`] for this keyspace
    /// sets [`Context::cluster_mode`] from it.
    pub cluster_mode: bool,
    /// A replica of a Raft group: writes apply on every replica, so a script
    /// that may write cannot be killed on one of them (see the scripting crate).
    pub replicated: bool,
    /// How scripting commands find their engine (None: they answer an error).
    pub scripting: Option<ScriptingSetup>,
    /// `notify-keyspace-events` as [`crate::notify::class`] bits (0: off).
    pub notify_flags: u32,
    /// `maxmemory` and its policy; `None` without a limit.
    pub max_memory: Option<crate::evict::MemoryLimit>,
    /// `lua-instruction-limit`: the Lua VM instructions one script may run
    /// before it is stopped. It decides outcomes, so every replica of a group
    /// must use the same value.
    pub script_instruction_limit: u64,
    /// On while some client of the node tracks keys (CLIENT TRACKING): the
    /// keyspace then records the keys writes change, for the node to send
    /// invalidations (see [`Keyspace::take_invalidations`]). A switch the
    /// node flips, shared by every keyspace it hosts; not replicated state.
    pub tracking: Option<Arc<AtomicBool>>,
}

impl KeyspaceConfig {
    /// Whether writes record the keys they change (see [`KeyspaceConfig::tracking`]).
    pub fn tracking_on(&self) -> bool {
        self.tracking
            .as_ref()
            .is_some_and(|switch| switch.load(Ordering::Relaxed))
    }
}

impl Default for KeyspaceConfig {
    fn default() -> Self {
        KeyspaceConfig {
            max_string_bytes: 512 * 1024 * 1024,
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time_minutes: 1,
            cluster_mode: false,
            replicated: false,
            scripting: None,
            notify_flags: 0,
            max_memory: None,
            script_instruction_limit: DEFAULT_SCRIPT_INSTRUCTION_LIMIT,
            tracking: None,
        }
    }
}

/// The default `lua-instruction-limit`: a few seconds of a busy loop.
pub const DEFAULT_SCRIPT_INSTRUCTION_LIMIT: u64 = 1_000_000_000;

/// Counters reported by INFO stats.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Writes since start (INFO persistence `rdb_changes_since_last_save`).
    pub dirty: u64,
    /// Keys deleted to stay under `maxmemory` (INFO stats `evicted_keys`).
    pub evicted_keys: u64,
}

/// Where a hash slot stands in a migration away from this keyspace. A slot with
/// no state is served normally. The state decides replies, so it is replicated
/// state: it changes only through the log, and snapshots and the digest carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SlotState {
    /// The slot is being copied to another shard: reads are served, writes are
    /// answered TRYAGAIN, so a copy taken from now on holds every acknowledged
    /// write.
    Frozen,
    /// The slot has moved away and its keys were dropped: every command with
    /// keys in it is answered TRYAGAIN (the client retries and is redirected).
    Gone,
}

/// Redis's LFU_INIT_VAL: the counter a new key starts with.
const LFU_INITIAL_COUNTER: u32 = 5;

/// Cloning copies everything, table layouts included: the copy answers and
/// changes exactly as the original would (the copy step of a snapshot, taken
/// under a lock and serialized later). Key tables and slot indexes are shared
/// copy-on-write (see [`crate::dict::Dict`]), so a clone costs one reference per
/// page of 256 buckets and per slot, not a copy of the data.
#[derive(Clone)]
pub struct Keyspace {
    pub(crate) dbs: Vec<Db>,
    pub config: KeyspaceConfig,
    pub stats: Stats,
    /// Keys that received list elements since the last
    /// [`Keyspace::take_ready_keys`], in the order they first did; with
    /// `ready_set` for the duplicate check. Not replicated state: nothing a
    /// command answers depends on it.
    ready_keys: Vec<(usize, Bytes)>,
    ready_set: BTreeSet<(usize, Bytes)>,
    /// Whether [`Keyspace::signal_ready`] records anything (on unless the
    /// node, knowing no client waits, turns it off to save the work).
    track_ready: bool,
    /// The draws of the LFU counter's probabilistic increment when a write
    /// looks a key up. Replica-local, like the access data it decides: a
    /// write's own random source (`Context::rng`, from its log entry) must
    /// not be consumed by a figure that depends on each replica's
    /// `maxmemory-policy`, or the replicas' later draws would differ.
    access_rng: Rng,
    /// Slots being migrated away or already gone (absent: served). Replicated
    /// state (see [`SlotState`]).
    slot_states: BTreeMap<u16, SlotState>,
    /// Cached scripts and function libraries (replicated state).
    pub scripts: ScriptStore,
    /// The script engine, built on first use (derived state).
    pub(crate) engine: EngineSlot,
    /// Keyspace events recorded since the last [`Keyspace::take_events`]
    /// (only while notifications are on; not replicated state).
    pub(crate) events: Vec<crate::notify::Event>,
    /// Events a stream command raised, with their keys, in order (stream
    /// commands name their events themselves: XADD may raise `xadd` and
    /// `xtrim`, XREADGROUP only `xgroup-createconsumer`); recorded only
    /// while notifications are on, drained by `execute`.
    pub(crate) stream_events: Vec<(&'static str, Bytes)>,
    /// Whether the databases record expired keys for events.
    pub(crate) recording_expired: bool,
    /// Messages scripts published (PUBLISH/SPUBLISH) since the last
    /// [`Keyspace::take_published`]; the node delivers them (not replicated
    /// state).
    pub(crate) published: Vec<Published>,
    /// Whether commands run by scripts are recorded for MONITOR (set by the
    /// node while a monitor is connected; not replicated state).
    pub record_script_calls: bool,
    /// (database, arguments) of each command a script ran since the last
    /// [`Keyspace::take_script_calls`], while recording.
    script_calls: Vec<(usize, Vec<Bytes>)>,
    /// Keys changed since the last [`Keyspace::take_invalidations`], while
    /// [`KeyspaceConfig::tracking`] is on (not replicated state).
    pub(crate) invalidations: Invalidations,
}

/// Most keys [`Invalidations`] holds between two drains; past it they
/// become one flush (every client drops everything it cached).
pub const MAX_INVALIDATIONS: usize = 1 << 16;

/// What client-side caches must drop: the keys writes changed, or all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invalidations {
    /// Each changed key (by name: tracking ignores databases, as Redis's),
    /// with whether a command changed it (false: expiry or eviction). A
    /// client that asked for NOLOOP is not told of its own commands' writes.
    pub keys: Vec<(Bytes, bool)>,
    /// FLUSHDB or FLUSHALL ran (or too many keys changed to list).
    pub flushed: bool,
}

impl Invalidations {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.flushed
    }

    pub(crate) fn push(&mut self, key: &Bytes, by_command: bool) {
        if self.flushed {
            return;
        }
        if self.keys.len() >= MAX_INVALIDATIONS {
            self.keys = Vec::new();
            self.flushed = true;
            return;
        }
        self.keys.push((key.clone(), by_command));
    }
}

/// A message a script published: delivered by the node once the script's
/// command (or entry) is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub channel: Bytes,
    pub message: Bytes,
    /// SPUBLISH: a shard channel.
    pub shard: bool,
}

impl Keyspace {
    /// A keyspace with `databases` databases. `hash_seed` keys the hash tables; it is
    /// state, so replicas built from the same seed lay out keys identically.
    pub fn new(databases: usize, hash_seed: u64) -> Self {
        let mut seeds = Rng::new(hash_seed);
        let dbs = (0..databases.max(1))
            .map(|_| Db::new((seeds.next_u64(), seeds.next_u64())))
            .collect();
        Keyspace {
            dbs,
            config: KeyspaceConfig::default(),
            stats: Stats::default(),
            ready_keys: Vec::new(),
            ready_set: BTreeSet::new(),
            track_ready: true,
            access_rng: Rng::new(ACCESS_RNG_SEED),
            slot_states: BTreeMap::new(),
            scripts: ScriptStore::default(),
            engine: EngineSlot::default(),
            events: Vec::new(),
            stream_events: Vec::new(),
            recording_expired: false,
            published: Vec::new(),
            record_script_calls: false,
            script_calls: Vec::new(),
            invalidations: Invalidations::default(),
        }
    }

    /// A keyspace made of already built databases and slot states (a loaded
    /// snapshot).
    pub(crate) fn from_parts(
        dbs: Vec<Db>,
        slot_states: BTreeMap<u16, SlotState>,
        config: KeyspaceConfig,
    ) -> Self {
        debug_assert!(!dbs.is_empty());
        debug_assert!(slot_states.keys().all(|&slot| slot < cluster::SLOTS));
        Keyspace {
            dbs,
            config,
            stats: Stats::default(),
            ready_keys: Vec::new(),
            ready_set: BTreeSet::new(),
            track_ready: true,
            access_rng: Rng::new(ACCESS_RNG_SEED),
            slot_states,
            scripts: ScriptStore::default(),
            engine: EngineSlot::default(),
            events: Vec::new(),
            stream_events: Vec::new(),
            recording_expired: false,
            published: Vec::new(),
            record_script_calls: false,
            script_calls: Vec::new(),
            invalidations: Invalidations::default(),
        }
    }

    pub fn database_count(&self) -> usize {
        self.dbs.len()
    }

    /// A clone for a snapshot (as [`Clone`]): what the live keyspace copies
    /// from pages the clone shares, and so leaves to it, is counted in
    /// [`Keyspace::snapshot_copy_bytes`] until the clone is dropped.
    pub fn clone_for_snapshot(&mut self) -> Keyspace {
        let tracked = self.dbs.iter_mut().map(Db::clone_tracked).collect();
        // The rest as `Clone` copies it, without cloning the databases twice.
        let dbs = std::mem::take(&mut self.dbs);
        let mut copy = self.clone();
        self.dbs = dbs;
        copy.dbs = tracked;
        copy
    }

    /// Estimated bytes held only by the latest snapshot clone (pages the
    /// live keyspace copied on writes since it was made); 0 once it is
    /// dropped. Memory a snapshot holds is left out of `maxmemory`, as
    /// Redis's forked child's copy-on-write pages are.
    pub fn snapshot_copy_bytes(&self) -> u64 {
        self.dbs.iter().map(Db::snapshot_copy_bytes).sum()
    }

    pub fn db(&mut self, index: usize) -> &mut Db {
        &mut self.dbs[index]
    }

    pub fn db_ref(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    /// SWAPDB. While clients may be blocked, every key of either database
    /// that holds (or held) a list, sorted set or stream is reported ready
    /// in both: a waiter on one now sees the other database's value, or a
    /// stream gone (Redis 7.2 wakes both kinds the same way).
    pub fn swap_dbs(&mut self, first: usize, second: usize) {
        let keys: Vec<Bytes> = if self.track_ready {
            [first, second]
                .iter()
                .flat_map(|&index| self.dbs[index].entries())
                .filter(|(_, entry)| {
                    matches!(
                        entry.value,
                        Value::List(_) | Value::ZSet(_) | Value::Stream(_)
                    )
                })
                .map(|(key, _)| Bytes::copy_from_slice(key))
                .collect()
        } else {
            Vec::new()
        };
        self.dbs.swap(first, second);
        for key in keys {
            self.signal_ready(first, &key);
            self.signal_ready(second, &key);
        }
    }

    /// Before FLUSHDB or FLUSHALL empties database `db`: while clients may be
    /// blocked, its streams are reported ready, so an XREADGROUP waiting on
    /// one runs again and learns it is gone.
    pub fn signal_streams_of(&mut self, db: usize) {
        if !self.track_ready {
            return;
        }
        let streams: Vec<Bytes> = self.dbs[db]
            .entries()
            .filter(|(_, entry)| matches!(entry.value, Value::Stream(_)))
            .map(|(key, _)| Bytes::copy_from_slice(key))
            .collect();
        for key in streams {
            self.signal_ready(db, &key);
        }
    }

    /// Starts keeping a per-slot key index in every database (a node that serves
    /// hash slots turns it on once, at creation). The choice is state: snapshots
    /// record it, so a loaded keyspace keeps the index too.
    pub fn enable_slot_index(&mut self) {
        for db in &mut self.dbs {
            db.enable_slot_index();
        }
    }

    /// Whether the databases keep a per-slot key index.
    pub fn has_slot_index(&self) -> bool {
        self.dbs.iter().all(Db::has_slot_index)
    }

    /// Keys stored in hash slot `slot` of database `db` (see
    /// [`Db::count_keys_in_slot`]).
    pub fn count_keys_in_slot(&self, db: usize, slot: u16) -> usize {
        self.dbs[db].count_keys_in_slot(slot)
    }

    /// Up to `count` keys of hash slot `slot` of database `db` in byte order,
    /// after `after` (a cursor: the last key of the previous batch).
    pub fn keys_in_slot(
        &self,
        db: usize,
        slot: u16,
        after: Option<&[u8]>,
        count: usize,
    ) -> Vec<Bytes> {
        self.dbs[db].keys_in_slot(slot, after, count)
    }

    /// Whether hash slot `slot` of database `db` holds no key.
    pub fn slot_is_empty(&self, db: usize, slot: u16) -> bool {
        self.count_keys_in_slot(db, slot) == 0
    }

    /// Sets the migration state of hash slot `slot` (None: served normally). A
    /// slot out of range (16384 and above) is ignored: no key hashes there.
    pub fn set_slot_state(&mut self, slot: u16, state: Option<SlotState>) {
        if slot >= cluster::SLOTS {
            return;
        }
        match state {
            Some(state) => {
                self.slot_states.insert(slot, state);
            }
            None => {
                self.slot_states.remove(&slot);
                self.forget_slot_changes(slot);
            }
        }
    }

    /// Starts recording the keys changed in hash slot `slot`, which is being
    /// copied to another shard while it takes writes (see
    /// [`crate::slot_changes`]); true when the record starts afresh, false
    /// when the slot was tracked already (its record goes on). Setting the
    /// slot served again ([`Keyspace::set_slot_state`] with None) or dropping
    /// it forgets the record. A slot out of range is ignored (false).
    pub fn track_slot_changes(&mut self, slot: u16) -> bool {
        if slot >= cluster::SLOTS {
            return false;
        }
        let mut fresh = false;
        for db in &mut self.dbs {
            fresh |= db.track_slot_changes(slot);
        }
        fresh
    }

    /// Up to `count` keys of database `db` changed in `slot` since it was
    /// tracked, in byte order after `after`; None when they are unknown (the
    /// slot is not tracked, or its record was given up).
    pub fn slot_changes(
        &self,
        db: usize,
        slot: u16,
        after: Option<&[u8]>,
        count: usize,
    ) -> Option<Vec<Bytes>> {
        self.dbs.get(db)?.slot_changes(slot, after, count)
    }

    fn forget_slot_changes(&mut self, slot: u16) {
        for db in &mut self.dbs {
            db.forget_slot_changes(slot);
        }
    }

    /// The migration state of hash slot `slot` (None: served normally).
    pub fn slot_state(&self, slot: u16) -> Option<SlotState> {
        self.slot_states.get(&slot).copied()
    }

    /// Every slot that is not served normally, with its state, in slot order.
    pub fn slot_states(&self) -> &BTreeMap<u16, SlotState> {
        &self.slot_states
    }

    /// Deletes every stored key of hash slot `slot` (expired ones included) in
    /// every database and marks the slot [`SlotState::Gone`]; answers how many
    /// keys were deleted. Uses the slot index when the databases keep one,
    /// otherwise one pass over each table. Either way the keys go in byte
    /// order, so the result does not depend on the index. A slot out of range
    /// holds nothing and changes nothing.
    pub fn drop_slot(&mut self, slot: u16) -> usize {
        self.drop_slot_keys(slot, usize::MAX)
    }

    /// [`Keyspace::drop_slot`], deleting at most `limit` keys (the first in
    /// byte order, database by database); the slot is marked gone however
    /// many remain.
    pub fn drop_slot_keys(&mut self, slot: u16, limit: usize) -> usize {
        if slot >= cluster::SLOTS {
            return 0;
        }
        let mut dropped = 0;
        for db in &mut self.dbs {
            let left = limit - dropped;
            if left == 0 {
                break;
            }
            let keys: Vec<Bytes> = if db.has_slot_index() {
                db.keys_in_slot(slot, None, left)
            } else {
                let mut keys: Vec<Bytes> = db
                    .entries()
                    .filter(|(key, _)| cluster::key_slot(key) == slot)
                    .map(|(key, _)| Bytes::copy_from_slice(key))
                    .collect();
                keys.sort_unstable();
                keys.truncate(left);
                keys
            };
            for key in &keys {
                if db.remove(key).is_some() {
                    dropped += 1;
                }
            }
        }
        self.stats.dirty += dropped as u64;
        self.forget_slot_changes(slot);
        self.slot_states.insert(slot, SlotState::Gone);
        dropped
    }

    /// The live entry of `key` in the selected database. An expired key is absent,
    /// and deleted as well when `context.lazy_expire` is set.
    fn live_entry<'a>(dbs: &'a mut [Db], context: &Context, key: &[u8]) -> Option<&'a mut Entry> {
        let db = &mut dbs[context.db];
        if context.lazy_expire {
            db.get_mut(key, context.now_ms)
        } else {
            db.get_mut_live(key, context.now_ms)
        }
    }

    /// Looks a key up for a read command: counts a hit or miss and records the
    /// access.
    pub fn read(&mut self, context: &mut Context, key: &[u8]) -> Option<&mut Entry> {
        match Self::live_entry(&mut self.dbs, context, key) {
            Some(entry) => {
                self.stats.keyspace_hits += 1;
                if !context.no_touch {
                    let now_ms = context.now_ms;
                    entry.access =
                        next_access(&self.config, entry.access, now_ms, &mut context.rng);
                }
                Some(entry)
            }
            None => {
                self.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Looks a key up for a read that leaves the access data alone (Redis's
    /// `LOOKUP_NOTOUCH`: EXISTS, TYPE, TTL, OBJECT): counts a hit or miss.
    pub fn read_untouched(&mut self, context: &Context, key: &[u8]) -> Option<&Entry> {
        match Self::live_entry(&mut self.dbs, context, key) {
            Some(entry) => {
                self.stats.keyspace_hits += 1;
                Some(entry)
            }
            None => {
                self.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Looks a key up for a write command: records the access (the LRU
    /// clock, or a count toward the LFU counter, as Redis's
    /// `lookupKeyWrite`), counts nothing.
    pub fn lookup_write(&mut self, context: &mut Context, key: &[u8]) -> Option<&mut Entry> {
        let entry = Self::live_entry(&mut self.dbs, context, key)?;
        if !context.no_touch {
            entry.access = next_access(
                &self.config,
                entry.access,
                context.now_ms,
                &mut self.access_rng,
            );
        }
        Some(entry)
    }

    /// Stores a value (replacing value and TTL), counting one change.
    pub fn set(
        &mut self,
        context: &mut Context,
        key: &[u8],
        value: Value,
        expire_at_ms: Option<u64>,
    ) {
        let access = self.overwrite_access(context, key, false);
        self.store(context, key, value, expire_at_ms, access);
    }

    /// [`Keyspace::set`] for a write that has looked the key up already
    /// ([`Keyspace::lookup_write`] counted that access).
    pub fn set_looked_up(
        &mut self,
        context: &mut Context,
        key: &[u8],
        value: Value,
        expire_at_ms: Option<u64>,
    ) {
        let access = self.overwrite_access(context, key, true);
        self.store(context, key, value, expire_at_ms, access);
    }

    /// The access data of a value about to replace `key`'s. Under LFU an
    /// overwritten key keeps its counter (Redis looks the key up for the
    /// write, counting one access unless `counted` already, then carries the
    /// counter over to the new value); otherwise, and for a new key, the
    /// value is accessed now.
    fn overwrite_access(&mut self, context: &Context, key: &[u8], counted: bool) -> u32 {
        if !self.config.lfu {
            // No lookup: a plain SET under LRU needs none.
            return self.initial_access(context);
        }
        let kept = match self.dbs[context.db].peek(key, context.now_ms) {
            Some(old) if counted || context.no_touch => Some(old.access),
            Some(old) => Some(next_access(
                &self.config,
                old.access,
                context.now_ms,
                &mut self.access_rng,
            )),
            _ => None,
        };
        kept.unwrap_or_else(|| self.initial_access(context))
    }

    fn store(
        &mut self,
        context: &mut Context,
        key: &[u8],
        value: Value,
        expire_at_ms: Option<u64>,
        access: u32,
    ) {
        let db = &mut self.dbs[context.db];
        // Overwriting a key that had already expired counts as its expiry, as when
        // Redis's SET looks the key up first.
        if let Some(replaced) = db.set(key, value, expire_at_ms, access) {
            if replaced.is_expired(context.now_ms) {
                db.expired_keys += 1;
            }
            if matches!(replaced.value, Value::Stream(_)) {
                self.signal_ready(context.db, key);
            }
        }
        self.stats.dirty += 1;
    }

    /// Replaces a value keeping the key's TTL, counting one change.
    /// The key was looked up already (SET KEEPTTL), which counted the access.
    pub fn set_keep_ttl(&mut self, context: &mut Context, key: &[u8], value: Value) {
        let access = self.overwrite_access(context, key, true);
        self.dbs[context.db].set_keep_ttl(key, value, access);
        self.stats.dirty += 1;
    }

    /// Deletes a live key from the selected database; true if it existed.
    pub fn delete(&mut self, context: &mut Context, key: &[u8]) -> bool {
        let Some(entry) = Self::live_entry(&mut self.dbs, context, key) else {
            return false;
        };
        // A client blocked in XREADGROUP on a stream runs again and learns
        // that its group is gone.
        let stream = matches!(entry.value, Value::Stream(_));
        self.dbs[context.db].remove(key);
        self.stats.dirty += 1;
        if stream {
            self.signal_ready(context.db, key);
        }
        true
    }

    /// Records that `key` in database `db` received elements (list, sorted
    /// set or stream), or that a stream there went away, so clients blocked
    /// on it may now be served. Each key is recorded once until the next
    /// [`Keyspace::take_ready_keys`].
    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        if !self.track_ready || self.ready_keys.len() >= MAX_READY_KEYS {
            return;
        }
        let entry = (db, Bytes::copy_from_slice(key));
        if self.ready_set.insert(entry.clone()) {
            self.ready_keys.push(entry);
        }
    }

    /// The keys (database, name) that received list elements since the last
    /// call, in the order they first did, each once; clears the record. The node
    /// calls this after every batch it runs and re-runs the commands of clients
    /// blocked on these keys.
    /// Records a message a script published.
    pub fn publish_from_script(&mut self, channel: Bytes, message: Bytes, shard: bool) {
        self.published.push(Published {
            channel,
            message,
            shard,
        });
    }

    /// Records a command a script runs in database `db`, for MONITOR.
    pub fn note_script_call(&mut self, db: usize, arguments: &[Bytes]) {
        if self.record_script_calls {
            self.script_calls.push((db, arguments.to_vec()));
        }
    }

    /// The commands scripts ran since the last call (see
    /// [`Keyspace::note_script_call`]).
    pub fn take_script_calls(&mut self) -> Vec<(usize, Vec<Bytes>)> {
        std::mem::take(&mut self.script_calls)
    }

    /// The messages scripts published since the last call.
    pub fn take_published(&mut self) -> Vec<Published> {
        std::mem::take(&mut self.published)
    }

    /// The keys changed since the last call while tracking was on (see
    /// [`KeyspaceConfig::tracking`]), expired keys included.
    pub fn take_invalidations(&mut self) -> Invalidations {
        if self.recording_expired {
            self.collect_expired();
        }
        std::mem::take(&mut self.invalidations)
    }

    pub fn take_ready_keys(&mut self) -> Vec<(usize, Bytes)> {
        // Streams expiry deleted (recorded only while tracking is on).
        if self.track_ready {
            for index in 0..self.dbs.len() {
                for key in self.dbs[index].take_gone_streams() {
                    self.signal_ready(index, &key);
                }
            }
        }
        self.ready_set.clear();
        std::mem::take(&mut self.ready_keys)
    }

    /// What WATCH remembers of a key: its value's digest and its expiry time
    /// ("absent" for a missing or expired key). EXEC compares it again; any
    /// change aborts the transaction.
    pub fn watch_fingerprint(&self, db: usize, key: &[u8], now_ms: u64) -> Bytes {
        let Some(db) = self.dbs.get(db) else {
            return Bytes::from_static(b"absent");
        };
        match db.peek(key, now_ms) {
            None => Bytes::from_static(b"absent"),
            Some(entry) => Bytes::from(format!(
                "{}:{}",
                crate::digest::value_digest(Some(entry)),
                entry.expire_at_ms().unwrap_or(0)
            )),
        }
    }

    /// Turns the recording of ready keys on or off (off also forgets what was
    /// recorded). The node turns it off while no client is blocked and on, under
    /// the same lock, before it registers one, so no push a waiter needs can go
    /// unrecorded.
    pub fn set_ready_tracking(&mut self, on: bool) {
        if !on && !self.track_ready {
            // Already off (the usual case, after every batch while no client
            // is blocked): nothing was recorded since.
            return;
        }
        self.track_ready = on;
        for db in &mut self.dbs {
            db.record_gone_streams(on);
        }
        if !on {
            self.ready_keys.clear();
            self.ready_set.clear();
        }
    }

    /// Access data for a key created now.
    pub fn initial_access(&self, context: &Context) -> u32 {
        if self.config.lfu {
            (lfu_minutes(context) << 8) | LFU_INITIAL_COUNTER
        } else {
            lru_clock(context)
        }
    }

    /// Warms the cache for a batch of lookups in database `db` (pipelined requests).
    /// Changes nothing; only the speed of the lookups that follow.
    pub fn prefetch<'k>(&self, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        if let Some(db) = self.dbs.get(db) {
            db.prefetch(keys);
        }
    }

    /// Warms the cache for the member lookups of a batch's set and hash
    /// commands (SADD, SISMEMBER, HSET, HGET, ...), as
    /// [`Keyspace::prefetch`] does for their keys: in a large set or hash
    /// each lookup misses the cache twice in a row, and a pipeline's lookups
    /// then overlap instead (see [`crate::indexed::Prefetch`]). Run after the
    /// keys' prefetch, which brings in the values. Changes nothing.
    pub fn prefetch_members<'a>(
        &self,
        db: usize,
        requests: impl Iterator<Item = (&'static crate::CommandSpec, &'a [Bytes])> + Clone,
    ) {
        use crate::hash::HashValue;
        use crate::indexed::{Prefetch, PREFETCH_LOOKUPS};
        use crate::set::SetValue;
        let Some(db) = self.dbs.get(db) else {
            return;
        };
        // A lone lookup is made right away anyway.
        let mut lookups = requests
            .clone()
            .flat_map(|(spec, arguments)| member_arguments(spec, arguments));
        if lookups.nth(1).is_none() {
            return;
        }
        let mut sets = Prefetch::new();
        let mut hashes = Prefetch::new();
        // Sorted sets' members, in the order met: each run on one index
        // is prefetched with the index's own prefetch.
        let mut scored: Vec<(&crate::dict::Dict<f64>, &[u8])> = Vec::new();
        // The value of the key looked up last: a pipeline often addresses one.
        let mut last: Option<(&[u8], Option<&Value>)> = None;
        'requests: for (spec, arguments) in requests {
            let mut members = member_arguments(spec, arguments).peekable();
            if members.peek().is_none() {
                continue;
            }
            let key = &arguments[1][..];
            let value = match last {
                Some((known, value)) if known == key => value,
                _ => {
                    let value = db.peek_stored(key).map(|entry| &entry.value);
                    last = Some((key, value));
                    value
                }
            };
            for member in members {
                let room = match value {
                    Some(Value::Set(SetValue::Table(table))) => sets.add(table, member),
                    Some(Value::Hash(HashValue::Table(table))) => hashes.add(table, member),
                    Some(Value::ZSet(zset)) => match zset.member_index() {
                        Some(index) if scored.len() < PREFETCH_LOOKUPS => {
                            scored.push((index, member));
                            true
                        }
                        Some(_) => false,
                        None => continue 'requests,
                    },
                    _ => continue 'requests,
                };
                if !room {
                    break 'requests;
                }
            }
        }
        sets.run();
        hashes.run();
        for run in scored.chunk_by(|(one, _), (other, _)| std::ptr::eq(*one, *other)) {
            run[0].0.prefetch(run.iter().map(|(_, member)| *member));
        }
    }

    /// Total expired-and-deleted keys across databases.
    pub fn expired_keys(&self) -> u64 {
        self.dbs.iter().map(|db| db.expired_keys).sum()
    }

    /// One active-expiry pass over every database (the node runs it `hz` times a
    /// second with the current time; replicas run it from the log).
    pub fn active_expire_cycle(&mut self, now_ms: u64) -> usize {
        self.dbs
            .iter_mut()
            .map(|db| db.active_expire_cycle(now_ms, 16))
            .sum()
    }

    /// Seconds since the key was last accessed (LRU mode).
    pub fn idle_seconds(&self, entry: &Entry, context: &Context) -> u64 {
        (lru_clock(context).wrapping_sub(entry.access)) as u64
    }

    /// The key's logarithmic access counter after decay (LFU mode).
    pub fn lfu_counter(&self, entry: &Entry, context: &Context) -> u32 {
        lfu_decayed_counter(&self.config, entry.access, context)
    }
}

/// The members (sets) or fields (hashes) a command looks up in the value of
/// its key, `arguments[1]`; none for other commands.
fn member_arguments<'a>(
    spec: &crate::CommandSpec,
    arguments: &'a [Bytes],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let (first, step, all) = match spec.name {
        "sadd" | "srem" | "smismember" | "hmget" | "hdel" | "zrem" | "zmscore" => (2, 1, true),
        "hset" | "hmset" => (2, 2, true),
        "sismember" | "hget" | "hsetnx" | "hexists" | "hstrlen" | "hincrby" | "hincrbyfloat"
        | "zscore" | "zrank" | "zrevrank" => (2, 1, false),
        "zincrby" => (3, 1, false),
        // Score-member pairs end the arguments and follow the options: the
        // members are every second argument back from the last. An option
        // may be taken for one, which costs a wasted prefetch only.
        "zadd" if arguments.len() >= 4 => (3 + arguments.len() % 2, 2, true),
        _ => (arguments.len(), 1, false),
    };
    let end = if all {
        arguments.len()
    } else {
        (first + 1).min(arguments.len())
    };
    arguments
        .get(first.min(end)..end)
        .unwrap_or_default()
        .iter()
        .step_by(step)
        .map(|member| &member[..])
}

fn lru_clock(context: &Context) -> u32 {
    lru_clock_at(context.now_ms)
}

fn lru_clock_at(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32
}

fn lfu_minutes(context: &Context) -> u32 {
    lfu_minutes_at(context.now_ms)
}

/// 16 bits of minutes, as Redis keeps them.
fn lfu_minutes_at(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xFFFF) as u32
}

fn lfu_decayed_counter(config: &KeyspaceConfig, access: u32, context: &Context) -> u32 {
    lfu_decay(config, access, lfu_minutes(context))
}

/// The LFU counter in `access` after the decay periods up to `now_minutes`.
fn lfu_decay(config: &KeyspaceConfig, access: u32, now_minutes: u32) -> u32 {
    // 16 bits of minutes, as Redis keeps them. Access data written under
    // an LRU policy (seconds, up to 32 bits) reads as some counter and time
    // after a switch to LFU, as in Redis, and must not overflow here.
    let last_minutes = (access >> 8) & 0xFFFF;
    let counter = access & 0xFF;
    let elapsed = if now_minutes >= last_minutes {
        now_minutes - last_minutes
    } else {
        65535 - last_minutes + now_minutes
    };
    let periods = elapsed
        .checked_div(config.lfu_decay_time_minutes)
        .unwrap_or(0);
    counter.saturating_sub(periods)
}

/// Seeds [`Keyspace::access_rng`] (any constant: the draws only need to be
/// reproducible for the simulation).
const ACCESS_RNG_SEED: u64 = 0x0001_f0ac_ce55;

/// A key's access data after one more access at `now_ms`: the LRU clock, or
/// the LFU counter decayed and then incremented with probability
/// 1 / ((counter - 5) * lfu-log-factor + 1), drawn from `rng`.
fn next_access(config: &KeyspaceConfig, access: u32, now_ms: u64, rng: &mut Rng) -> u32 {
    if !config.lfu {
        return lru_clock_at(now_ms);
    }
    let minutes = lfu_minutes_at(now_ms);
    let mut counter = lfu_decay(config, access, minutes);
    if counter < 255 {
        let base = counter.saturating_sub(LFU_INITIAL_COUNTER) as f64;
        let probability = 1.0 / (base * config.lfu_log_factor as f64 + 1.0);
        if rng.unit_f64() < probability {
            counter += 1;
        }
    }
    (minutes << 8) | counter
}

#[cfg(test)]
mod tests {
    use crate::testing::{Harness, START_MS};
    use resp::Frame;

    fn words(line: &str) -> Vec<bytes::Bytes> {
        line.split(' ')
            .map(|word| bytes::Bytes::copy_from_slice(word.as_bytes()))
            .collect()
    }

    /// The member prefetch asks for exactly what each command looks up in
    /// its key's value: members, fields (not HSET's values), nothing else.
    #[test]
    fn the_member_prefetch_names_the_looked_up_members() {
        let cases = [
            ("SADD s a b c", vec!["a", "b", "c"]),
            ("SREM s a", vec!["a"]),
            ("SMISMEMBER s a b", vec!["a", "b"]),
            ("SISMEMBER s a", vec!["a"]),
            ("HSET h f1 v1 f2 v2", vec!["f1", "f2"]),
            ("HMSET h f1 v1", vec!["f1"]),
            ("HGET h f", vec!["f"]),
            ("HMGET h f g", vec!["f", "g"]),
            ("HDEL h f g", vec!["f", "g"]),
            ("HSETNX h f v", vec!["f"]),
            ("HINCRBY h f 1", vec!["f"]),
            ("HINCRBYFLOAT h f 1.5", vec!["f"]),
            ("HEXISTS h f", vec!["f"]),
            ("HSTRLEN h f", vec!["f"]),
            ("GET k", vec![]),
            ("SMEMBERS s", vec![]),
            ("HGETALL h", vec![]),
            ("ZADD z 1 a", vec!["a"]),
            ("ZADD z 1 a 2 b", vec!["a", "b"]),
            ("ZADD z NX 1 a", vec!["a"]),
            ("ZADD z XX CH 1 a 2 b", vec!["CH", "a", "b"]),
            ("ZINCRBY z 2 a", vec!["a"]),
            ("ZSCORE z a", vec!["a"]),
            ("ZMSCORE z a b", vec!["a", "b"]),
            ("ZREM z a b", vec!["a", "b"]),
            ("ZRANK z a WITHSCORE", vec!["a"]),
            ("ZRANGE z 0 -1", vec![]),
        ];
        for (line, expected) in cases {
            let arguments = words(line);
            let spec = crate::commands::resolve(&arguments).unwrap();
            let found: Vec<&[u8]> = super::member_arguments(spec, &arguments).collect();
            let expected: Vec<&[u8]> = expected.iter().map(|word| word.as_bytes()).collect();
            assert_eq!(found, expected, "{line}");
        }
    }

    /// Prefetching changes nothing, whatever the batch holds: large and
    /// small sets and hashes, missing keys, other types, more lookups than
    /// one prefetch takes.
    #[test]
    fn the_member_prefetch_changes_nothing() {
        let mut h = Harness::new();
        for index in 0..2_000 {
            let member = format!("member:{index}");
            h.run(&["SADD", "big-set", &member]);
            h.run(&["HSET", "big-hash", &member, "v"]);
            h.run(&["ZADD", "big-zset", &index.to_string(), &member]);
        }
        h.run(&["ZADD", "small-zset", "1", "a"]);
        h.run(&["SADD", "small-set", "a", "b"]);
        h.run(&["HSET", "small-hash", "f", "v"]);
        h.set("string", "v");
        let mut lines: Vec<String> = [
            "SADD big-set member:1 member:2 absent",
            "SISMEMBER big-set member:5",
            "HSET big-hash member:3 x member:4 y",
            "HGET big-hash member:7",
            "HMGET big-hash member:8 absent member:9",
            "SADD small-set c",
            "HGET small-hash f",
            "SISMEMBER string v",
            "HGET missing f",
            "GET string",
            "ZADD big-zset 5 member:1 6 absent",
            "ZADD big-zset NX CH 5 member:2",
            "ZSCORE big-zset member:3",
            "ZINCRBY small-zset 1 a",
            "ZSCORE string v",
        ]
        .iter()
        .map(|line| line.to_string())
        .collect();
        lines.extend((0..100).map(|index| format!("SISMEMBER big-set member:{index}")));
        lines.extend((0..100).map(|index| format!("ZSCORE big-zset member:{index}")));
        let batch: Vec<Vec<bytes::Bytes>> = lines.iter().map(|line| words(line)).collect();
        let requests: Vec<_> = batch
            .iter()
            .map(|arguments| (crate::commands::resolve(arguments).unwrap(), &arguments[..]))
            .collect();
        let before = crate::digest::digest(&h.keyspace, h.context.now_ms);
        h.keyspace.prefetch_members(0, requests.iter().copied());
        h.keyspace.prefetch_members(1, requests.iter().copied());
        h.keyspace.prefetch_members(99, requests.iter().copied());
        assert_eq!(crate::digest::digest(&h.keyspace, h.context.now_ms), before);
        assert_eq!(h.run(&["SCARD", "big-set"]), Frame::Integer(2_000));
    }

    /// Under LFU, writes count as accesses, as Redis's `lookupKeyWrite`
    /// does: a counter at its initial 5 grows by one for certain on the next
    /// access. An overwrite keeps the counter (plus that access), a NO-TOUCH
    /// write leaves it, a write-only key such as a counter becomes frequent.
    #[test]
    fn writes_count_toward_the_lfu_counter() {
        let mut h = Harness::new();
        // A key written under LRU holds the clock in seconds; after a switch
        // to LFU it reads as some counter, and overwriting it works (at
        // today's clock, whose seconds do not fit LFU's 16 bits of minutes).
        h.context.now_ms = 1_795_800_000_000;
        h.set("before", "v");
        h.keyspace.config.lfu = true;
        let freq = |h: &mut Harness, key: &str| h.run(&["OBJECT", "FREQ", key]);
        assert!(matches!(freq(&mut h, "before"), Frame::Integer(_)));
        assert_eq!(h.run(&["SET", "before", "w"]), Frame::OK);
        assert_eq!(
            h.run(&["INCR", "before"]),
            Frame::error("ERR value is not an integer or out of range")
        );
        h.run(&["INCR", "hits"]);
        assert_eq!(freq(&mut h, "hits"), Frame::Integer(5));
        h.run(&["INCR", "hits"]);
        assert_eq!(freq(&mut h, "hits"), Frame::Integer(6));
        for _ in 0..2_000 {
            h.run(&["INCR", "hits"]);
        }
        let Frame::Integer(hot) = freq(&mut h, "hits") else {
            panic!("a counter");
        };
        assert!(hot > 10, "2,000 increments left the counter at {hot}");

        h.set("s", "v");
        h.run(&["SET", "s", "w"]);
        assert_eq!(freq(&mut h, "s"), Frame::Integer(6));
        h.set("x", "v");
        h.run(&["SET", "x", "w", "XX"]);
        assert_eq!(
            freq(&mut h, "x"),
            Frame::Integer(6),
            "one lookup, one access"
        );

        h.run(&["RPUSH", "dst", "a"]);
        h.run(&["RPUSH", "src", "b"]);
        h.run(&["LMOVE", "src", "dst", "LEFT", "LEFT"]);
        assert_eq!(freq(&mut h, "dst"), Frame::Integer(6));

        h.set("quiet", "v");
        h.context.no_touch = true;
        h.run(&["SET", "quiet", "w"]);
        h.run(&["APPEND", "quiet", "z"]);
        h.context.no_touch = false;
        assert_eq!(freq(&mut h, "quiet"), Frame::Integer(5));
    }

    /// With `lazy_expire` off (a replicated read), every read-only command sees an
    /// expired key as absent and leaves it in place.
    #[test]
    fn reads_without_lazy_expiry_change_nothing() {
        let mut h = Harness::new();
        h.set_with_expiry("gone", "v", START_MS + 5);
        h.set("kept", "w");
        let before = crate::digest::digest(&h.keyspace, START_MS);
        h.advance(10);
        h.context.lazy_expire = false;
        let reads: &[(&[&str], Frame)] = &[
            (&["GET", "gone"], Frame::Null),
            (&["EXISTS", "gone"], Frame::Integer(0)),
            (&["TTL", "gone"], Frame::Integer(-2)),
            (&["PTTL", "gone"], Frame::Integer(-2)),
            (&["TYPE", "gone"], Frame::simple("none")),
            (&["STRLEN", "gone"], Frame::Integer(0)),
            (
                &["GETRANGE", "gone", "0", "-1"],
                Frame::bulk_from_slice(b""),
            ),
            (
                &["MGET", "gone", "kept"],
                Frame::Array(vec![Frame::Null, Frame::bulk_from_slice(b"w")]),
            ),
            (
                &["KEYS", "*"],
                Frame::Array(vec![Frame::bulk_from_slice(b"kept")]),
            ),
            (&["TOUCH", "gone"], Frame::Integer(0)),
            (&["DBSIZE"], Frame::Integer(2)),
        ];
        for (command, expected) in reads {
            assert_eq!(&h.run(command), expected, "{command:?}");
            assert_eq!(h.keyspace.db_ref(0).len(), 2, "{command:?} deleted a key");
        }
        for _ in 0..50 {
            assert_ne!(h.run(&["RANDOMKEY"]), Frame::Null);
        }
        let Frame::Array(scan) = h.run(&["SCAN", "0", "COUNT", "100"]) else {
            panic!("SCAN reply");
        };
        assert_eq!(scan[1], Frame::Array(vec![Frame::bulk_from_slice(b"kept")]));
        assert_eq!(h.keyspace.db_ref(0).len(), 2);
        assert_eq!(crate::digest::digest(&h.keyspace, START_MS), before);
        // A write (through the log) still reclaims it.
        h.context.lazy_expire = true;
        assert_eq!(h.run(&["SET", "gone", "again", "NX"]), Frame::OK);
    }

    use crate::command::Handler;
    use crate::commands::all_commands;
    use crate::digest::digest;
    use crate::{Entry, Value};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Everything stored in every database (expired keys included), in table order.
    /// A stored key: name, value, expiry time.
    type RawEntry = (Vec<u8>, Value, Option<u64>);

    fn raw_state(h: &Harness) -> Vec<Vec<RawEntry>> {
        h.keyspace
            .dbs()
            .iter()
            .map(|db| {
                db.entries()
                    .map(|(key, entry)| (key.to_vec(), entry.value.clone(), entry.expire_at_ms()))
                    .collect()
            })
            .collect()
    }

    fn bulk(text: &str) -> Frame {
        Frame::bulk(text.to_string())
    }

    /// Every read-only keyspace command, with `lazy_expire` off, answers as if the
    /// expired keys were gone and leaves them stored: same entries, same tables,
    /// same expiry count, same digest taken before the expiry. The list must name
    /// every read-only command of the table, so a new one cannot skip this test.
    #[test]
    fn every_read_only_command_leaves_expired_keys_stored() {
        let mut h = Harness::new();
        h.set_with_expiry("gone", "value", START_MS + 5);
        h.set_with_expiry("gone-int", "12", START_MS + 5);
        h.set("kept", "w");
        h.set_value("gone-list", Value::list(["a", "b"]), Some(START_MS + 5));
        h.set_value("gone-hash", Value::hash([("f", "v")]), Some(START_MS + 5));
        h.set_value("gone-set", Value::set(["m", "1"]), Some(START_MS + 5));
        h.set_value(
            "gone-zset",
            Value::zset([(1.0, "a"), (2.0, "b")]),
            Some(START_MS + 5),
        );
        h.set_value(
            "gone-hll",
            Value::String(crate::StringValue::raw(crate::hll::new_sparse())),
            Some(START_MS + 5),
        );
        h.context.db = 1;
        h.set_with_expiry("other-db", "x", START_MS + 5);
        h.context.db = 0;
        let digest_before = digest(&h.keyspace, START_MS);
        h.advance(10);
        h.context.lazy_expire = false;
        let state_before = raw_state(&h);
        let layouts_before: Vec<_> = h.keyspace.dbs().iter().map(|db| db.layout()).collect();

        let array = |items: Vec<Frame>| Frame::Array(items);
        let cases: Vec<(Vec<&str>, Option<Frame>)> = vec![
            (vec!["GET", "gone"], Some(Frame::Null)),
            (vec!["GET", "gone-int"], Some(Frame::Null)),
            (vec!["GETRANGE", "gone", "0", "-1"], Some(bulk(""))),
            (vec!["GETBIT", "gone", "3"], Some(Frame::Integer(0))),
            (vec!["GEODIST", "gone-zset", "a", "b"], Some(Frame::Null)),
            (
                vec!["GEOHASH", "gone-zset", "a"],
                Some(array(vec![Frame::Null])),
            ),
            (
                vec!["GEOPOS", "gone-zset", "a"],
                Some(array(vec![Frame::NullArray])),
            ),
            (
                vec!["GEORADIUS_RO", "gone-zset", "0", "0", "1", "m"],
                Some(array(vec![])),
            ),
            (
                vec!["GEORADIUSBYMEMBER_RO", "gone-zset", "a", "1", "m"],
                Some(array(vec![])),
            ),
            (
                vec![
                    "GEOSEARCH",
                    "gone-zset",
                    "FROMLONLAT",
                    "0",
                    "0",
                    "BYRADIUS",
                    "1",
                    "m",
                ],
                Some(array(vec![])),
            ),
            (vec!["BITCOUNT", "gone"], Some(Frame::Integer(0))),
            (vec!["BITPOS", "gone", "1"], Some(Frame::Integer(-1))),
            (
                vec!["BITFIELD_RO", "gone", "GET", "u8", "0"],
                Some(array(vec![Frame::Integer(0)])),
            ),
            (vec!["SUBSTR", "gone", "0", "-1"], Some(bulk(""))),
            (
                vec!["MGET", "gone", "kept", "gone-int"],
                Some(array(vec![Frame::Null, bulk("w"), Frame::Null])),
            ),
            (vec!["STRLEN", "gone"], Some(Frame::Integer(0))),
            (vec!["LCS", "gone", "kept"], Some(bulk(""))),
            (
                vec!["EXISTS", "gone", "kept", "gone-int"],
                Some(Frame::Integer(1)),
            ),
            (vec!["TYPE", "gone"], Some(Frame::simple("none"))),
            (vec!["TYPE", "gone-list"], Some(Frame::simple("none"))),
            (vec!["LLEN", "gone-list"], Some(Frame::Integer(0))),
            (vec!["LRANGE", "gone-list", "0", "-1"], Some(array(vec![]))),
            (vec!["LINDEX", "gone-list", "0"], Some(Frame::Null)),
            (vec!["LPOS", "gone-list", "a"], Some(Frame::Null)),
            (
                vec!["LPOS", "gone-list", "a", "COUNT", "0"],
                Some(array(vec![])),
            ),
            (vec!["HGET", "gone-hash", "f"], Some(Frame::Null)),
            (
                vec!["HMGET", "gone-hash", "f"],
                Some(array(vec![Frame::Null])),
            ),
            (vec!["HEXISTS", "gone-hash", "f"], Some(Frame::Integer(0))),
            (vec!["HLEN", "gone-hash"], Some(Frame::Integer(0))),
            (vec!["HSTRLEN", "gone-hash", "f"], Some(Frame::Integer(0))),
            (vec!["HGETALL", "gone-hash"], Some(Frame::Map(vec![]))),
            (vec!["HKEYS", "gone-hash"], Some(array(vec![]))),
            (vec!["HVALS", "gone-hash"], Some(array(vec![]))),
            (vec!["HRANDFIELD", "gone-hash"], Some(Frame::Null)),
            (
                vec!["HRANDFIELD", "gone-hash", "-3", "WITHVALUES"],
                Some(array(vec![])),
            ),
            (
                vec!["HSCAN", "gone-hash", "0"],
                Some(array(vec![bulk("0"), array(vec![])])),
            ),
            (vec!["TYPE", "gone-hash"], Some(Frame::simple("none"))),
            (vec!["SISMEMBER", "gone-set", "m"], Some(Frame::Integer(0))),
            (
                vec!["SMISMEMBER", "gone-set", "m"],
                Some(array(vec![Frame::Integer(0)])),
            ),
            (vec!["SCARD", "gone-set"], Some(Frame::Integer(0))),
            (vec!["SMEMBERS", "gone-set"], Some(Frame::Set(vec![]))),
            (vec!["SRANDMEMBER", "gone-set"], Some(Frame::Null)),
            (vec!["SRANDMEMBER", "gone-set", "2"], Some(array(vec![]))),
            (
                vec!["SSCAN", "gone-set", "0"],
                Some(array(vec![bulk("0"), array(vec![])])),
            ),
            (vec!["SINTER", "gone-set"], Some(Frame::Set(vec![]))),
            (vec!["SINTERCARD", "1", "gone-set"], Some(Frame::Integer(0))),
            (
                vec!["SUNION", "gone-set", "gone-set"],
                Some(Frame::Set(vec![])),
            ),
            (vec!["SDIFF", "gone-set"], Some(Frame::Set(vec![]))),
            (vec!["TYPE", "gone-set"], Some(Frame::simple("none"))),
            (vec!["TYPE", "gone-zset"], Some(Frame::simple("none"))),
            (vec!["ZCARD", "gone-zset"], Some(Frame::Integer(0))),
            (
                vec!["ZCOUNT", "gone-zset", "-inf", "+inf"],
                Some(Frame::Integer(0)),
            ),
            (
                vec!["ZLEXCOUNT", "gone-zset", "-", "+"],
                Some(Frame::Integer(0)),
            ),
            (vec!["ZSCORE", "gone-zset", "a"], Some(Frame::Null)),
            (
                vec!["ZMSCORE", "gone-zset", "a"],
                Some(array(vec![Frame::Null])),
            ),
            (vec!["ZRANK", "gone-zset", "a"], Some(Frame::Null)),
            (vec!["ZREVRANK", "gone-zset", "a"], Some(Frame::Null)),
            (vec!["ZRANGE", "gone-zset", "0", "-1"], Some(array(vec![]))),
            (
                vec!["ZREVRANGE", "gone-zset", "0", "-1"],
                Some(array(vec![])),
            ),
            (
                vec!["ZRANGEBYSCORE", "gone-zset", "-inf", "+inf"],
                Some(array(vec![])),
            ),
            (
                vec!["ZREVRANGEBYSCORE", "gone-zset", "+inf", "-inf"],
                Some(array(vec![])),
            ),
            (
                vec!["ZRANGEBYLEX", "gone-zset", "-", "+"],
                Some(array(vec![])),
            ),
            (
                vec!["ZREVRANGEBYLEX", "gone-zset", "+", "-"],
                Some(array(vec![])),
            ),
            (vec!["ZRANDMEMBER", "gone-zset"], Some(Frame::Null)),
            (vec!["MEMORY", "USAGE", "gone-zset"], Some(Frame::Null)),
            (
                vec!["ZSCAN", "gone-zset", "0"],
                Some(array(vec![bulk("0"), array(vec![])])),
            ),
            (vec!["ZUNION", "1", "gone-zset"], Some(array(vec![]))),
            (vec!["ZINTER", "1", "gone-zset"], Some(array(vec![]))),
            (vec!["ZDIFF", "1", "gone-zset"], Some(array(vec![]))),
            (
                vec!["ZINTERCARD", "1", "gone-zset"],
                Some(Frame::Integer(0)),
            ),
            (vec!["PFCOUNT", "gone-hll"], Some(Frame::Integer(0))),
            (vec!["SORT_RO", "gone-list"], Some(array(vec![]))),
            (vec!["SORT_RO", "gone-set", "ALPHA"], Some(array(vec![]))),
            (
                vec![
                    "SORT_RO",
                    "gone-list",
                    "BY",
                    "gone*",
                    "GET",
                    "#",
                    "GET",
                    "gone-hash->f",
                ],
                Some(array(vec![])),
            ),
            (
                vec!["PFCOUNT", "gone-hll", "gone", "kept-hll"],
                Some(Frame::Integer(0)),
            ),
            (vec!["TTL", "gone"], Some(Frame::Integer(-2))),
            (vec!["PTTL", "gone"], Some(Frame::Integer(-2))),
            (vec!["EXPIRETIME", "gone"], Some(Frame::Integer(-2))),
            (vec!["PEXPIRETIME", "gone"], Some(Frame::Integer(-2))),
            (vec!["KEYS", "*"], Some(array(vec![bulk("kept")]))),
            (vec!["KEYS", "gone*"], Some(array(vec![]))),
            (
                vec!["SCAN", "0", "COUNT", "100"],
                Some(array(vec![bulk("0"), array(vec![bulk("kept")])])),
            ),
            (vec!["RANDOMKEY"], Some(bulk("kept"))),
            (vec!["TOUCH", "gone", "kept"], Some(Frame::Integer(1))),
            (vec!["DUMP", "gone"], Some(Frame::Null)),
            (vec!["OBJECT", "ENCODING", "gone"], Some(Frame::Null)),
            (vec!["OBJECT", "REFCOUNT", "gone"], Some(Frame::Null)),
            (vec!["OBJECT", "IDLETIME", "gone"], Some(Frame::Null)),
            (vec!["OBJECT", "FREQ", "gone"], Some(Frame::Null)),
            (vec!["OBJECT", "HELP"], None),
            (vec!["XLEN", "gone"], Some(Frame::Integer(0))),
            (vec!["XRANGE", "gone", "-", "+"], Some(array(vec![]))),
            (vec!["XREVRANGE", "gone", "+", "-"], Some(array(vec![]))),
            (
                vec!["XREAD", "STREAMS", "gone", "0"],
                Some(Frame::NullArray),
            ),
            (
                vec!["XPENDING", "gone", "g"],
                Some(Frame::error(
                    "NOGROUP No such key 'gone' or consumer group 'g'",
                )),
            ),
            (
                vec!["XINFO", "STREAM", "gone"],
                Some(Frame::error("ERR no such key")),
            ),
            (
                vec!["XINFO", "GROUPS", "gone"],
                Some(Frame::error("ERR no such key")),
            ),
            (
                vec!["XINFO", "CONSUMERS", "gone", "g"],
                Some(Frame::error("ERR no such key")),
            ),
            (vec!["XINFO", "HELP"], None),
            (vec!["XGROUP", "HELP"], None),
            // As Redis: DBSIZE counts keys not reclaimed yet.
            (vec!["DBSIZE"], Some(Frame::Integer(8))),
            (vec!["PING"], Some(Frame::simple("PONG"))),
            (vec!["ECHO", "hi"], Some(bulk("hi"))),
            (vec!["COMMAND"], None),
            (vec!["COMMAND", "COUNT"], None),
            (vec!["COMMAND", "INFO", "get"], None),
            (vec!["COMMAND", "DOCS", "get"], None),
            (vec!["COMMAND", "GETKEYS", "GET", "gone"], None),
            (vec!["COMMAND", "GETKEYSANDFLAGS", "GET", "gone"], None),
            (vec!["COMMAND", "LIST"], None),
            (vec!["COMMAND", "HELP"], None),
            (
                vec!["CLUSTER", "KEYSLOT", "gone"],
                Some(Frame::Integer(11139)),
            ),
            // As DBSIZE (and Redis), the slot commands see stored keys.
            (
                vec!["CLUSTER", "COUNTKEYSINSLOT", "11139"],
                Some(Frame::Integer(1)),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "11139", "10"],
                Some(array(vec![bulk("gone")])),
            ),
        ];
        let mut covered = BTreeSet::new();
        for (words, expected) in &cases {
            let arguments: Vec<bytes::Bytes> = words
                .iter()
                .map(|word| bytes::Bytes::copy_from_slice(word.as_bytes()))
                .collect();
            // Bare COMMAND does not resolve (the node answers it) but has a handler.
            let spec = crate::commands::resolve(&arguments)
                .ok()
                .or_else(|| crate::commands::lookup(&arguments[0]))
                .unwrap_or_else(|| panic!("{words:?} resolves"));
            for _ in 0..3 {
                let reply = h.keyspace.execute(spec, &mut h.context, &arguments);
                if let Some(expected) = expected {
                    assert_eq!(&reply, expected, "{words:?}");
                }
            }
            assert!(!spec.is_write(), "{words:?} is a write");
            covered.insert(spec.name);
            assert_eq!(raw_state(&h), state_before, "{words:?} changed the data");
        }
        for spec in all_commands().flat_map(|spec| std::iter::once(spec).chain(spec.subcommands)) {
            // The scripting crate tests its own commands (they need an engine).
            // PFSELFTEST touches no key (it builds its own values), and takes
            // seconds in a debug build.
            if matches!(spec.handler, Handler::Keyspace(_))
                && !spec.is_write()
                && spec.group != "scripting"
                && spec.name != "pfselftest"
            {
                assert!(
                    covered.contains(spec.name),
                    "read-only {} is not tested",
                    spec.name
                );
            }
        }
        // Nothing was reclaimed, in any way.
        assert_eq!(raw_state(&h), state_before);
        let layouts: Vec<_> = h.keyspace.dbs().iter().map(|db| db.layout()).collect();
        assert_eq!(layouts, layouts_before);
        assert_eq!(h.keyspace.expired_keys(), 0);
        assert_eq!(digest(&h.keyspace, START_MS), digest_before);
        let db = h.keyspace.db_ref(0);
        assert_eq!(db.len(), 8);
        assert_eq!(db.expires_len(), 7);
        assert!(db.peek(b"gone", START_MS).is_some());
        assert!(db.peek(b"gone", START_MS + 10).is_none());
        assert!(h.keyspace.db_ref(1).peek(b"other-db", START_MS).is_some());
        // The replica-local counters did move.
        assert!(h.keyspace.stats.keyspace_misses > 0);
        assert!(h.keyspace.stats.keyspace_hits > 0);
    }

    /// RANDOMKEY without lazy expiry never answers with an expired key, even when
    /// nearly all keys are, and answers nil when all are.
    #[test]
    fn randomkey_skips_expired_keys_without_reclaiming_them() {
        let mut h = Harness::new();
        for index in 0..500 {
            h.set_with_expiry(&format!("gone:{index}"), "v", START_MS + 5);
        }
        h.set("kept", "w");
        h.advance(10);
        h.context.lazy_expire = false;
        for _ in 0..20 {
            assert_eq!(h.run(&["RANDOMKEY"]), bulk("kept"));
        }
        h.context.lazy_expire = true;
        assert_eq!(h.run(&["DEL", "kept"]), Frame::Integer(1));
        h.context.lazy_expire = false;
        assert_eq!(h.run(&["RANDOMKEY"]), Frame::Null);
        assert_eq!(h.keyspace.db_ref(0).len(), 500);
        assert_eq!(h.keyspace.expired_keys(), 0);
    }

    /// Writes keep expiring lazily whatever the flag says (they run through the log
    /// on every replica), and the caller's flag is left as it was.
    #[test]
    fn writes_still_reclaim_expired_keys() {
        let mut h = Harness::new();
        for key in ["a", "b", "c", "d", "e"] {
            h.set_with_expiry(key, "v", START_MS + 5);
        }
        h.advance(10);
        h.context.lazy_expire = false;
        let writes: &[(&[&str], Frame)] = &[
            (&["SET", "a", "new", "NX"], Frame::OK),
            (&["DEL", "b"], Frame::Integer(0)),
            (&["PEXPIRE", "c", "1000"], Frame::Integer(0)),
            (&["GETEX", "d", "PERSIST"], Frame::Null),
            (&["APPEND", "e", "x"], Frame::Integer(1)),
        ];
        for (words, expected) in writes {
            assert_eq!(&h.run(words), expected, "{words:?}");
            assert!(!h.context.lazy_expire, "{words:?} left the flag on");
        }
        // b, c and d are gone; a and e were expired and replaced.
        assert_eq!(h.keyspace.db_ref(0).len(), 2);
        assert_eq!(h.keyspace.expired_keys(), 5);
        assert_eq!(h.get("a"), Some(Value::string("new")));
        assert_eq!(h.entry("e").and_then(Entry::expire_at_ms), None);
    }

    /// With lazy expiry on (standalone), a read reclaims what it finds expired.
    #[test]
    fn reads_with_lazy_expiry_reclaim() {
        let mut h = Harness::new();
        h.set_with_expiry("gone", "v", START_MS + 5);
        h.advance(10);
        assert!(h.context.lazy_expire);
        assert_eq!(h.run(&["EXISTS", "gone"]), Frame::Integer(0));
        assert_eq!(h.keyspace.db_ref(0).len(), 0);
        assert_eq!(h.keyspace.expired_keys(), 1);
    }

    /// One step of the comparison below.
    #[derive(Debug, Clone)]
    enum Step {
        Advance(u64),
        Command(Vec<String>),
    }

    fn step() -> impl Strategy<Value = Step> {
        let key = prop::sample::select(vec!["a", "b", "c", "n"]);
        let millis = 1u64..40;
        prop_oneof![
            millis.clone().prop_map(Step::Advance),
            (key.clone(), millis.clone()).prop_map(|(key, ttl)| Step::Command(vec![
                "SET".into(),
                key.into(),
                "v".into(),
                "PX".into(),
                ttl.to_string()
            ])),
            key.clone()
                .prop_map(|key| Step::Command(vec!["SET".into(), key.into(), "1".into()])),
            (key.clone(), millis).prop_map(|(key, ttl)| Step::Command(vec![
                "PEXPIRE".into(),
                key.into(),
                ttl.to_string()
            ])),
            (
                prop::sample::select(vec![
                    "GET",
                    "EXISTS",
                    "TTL",
                    "PTTL",
                    "TYPE",
                    "STRLEN",
                    "DUMP",
                    "TOUCH",
                    "INCR",
                    "APPEND",
                    "DEL",
                    "GETDEL",
                    "PERSIST",
                    "SETNX",
                    "GETSET",
                    "OBJECT ENCODING",
                ]),
                key
            )
                .prop_map(|(command, key)| {
                    let mut words: Vec<String> = command.split(' ').map(str::to_string).collect();
                    words.push(key.into());
                    if matches!(command, "APPEND" | "SETNX" | "GETSET") {
                        words.push("x".into());
                    }
                    Step::Command(words)
                }),
            Just(Step::Command(vec![
                "MGET".into(),
                "a".into(),
                "b".into(),
                "n".into()
            ])),
            Just(Step::Command(vec!["KEYS".into(), "*".into()])),
        ]
    }

    fn sorted(frame: Frame) -> Frame {
        match frame {
            Frame::Array(mut items) => {
                items.sort_by_key(|item| format!("{item:?}"));
                Frame::Array(items)
            }
            other => other,
        }
    }

    proptest! {
        /// A replica serving reads without lazy expiry answers every command as a
        /// standalone server does, and holds the same live data throughout.
        #[test]
        fn reads_without_lazy_expiry_answer_as_with_it(steps in prop::collection::vec(step(), 1..80)) {
            let mut standalone = Harness::new();
            let mut replica = Harness::new();
            replica.context.lazy_expire = false;
            for step in &steps {
                match step {
                    Step::Advance(millis) => {
                        standalone.advance(*millis);
                        replica.advance(*millis);
                    }
                    Step::Command(words) => {
                        let words: Vec<&str> = words.iter().map(String::as_str).collect();
                        let expected = sorted(standalone.run(&words));
                        prop_assert_eq!(sorted(replica.run(&words)), expected, "{:?}", words);
                    }
                }
                let now = standalone.context.now_ms;
                prop_assert_eq!(digest(&standalone.keyspace, now), digest(&replica.keyspace, now));
            }
        }
    }
}

#[cfg(test)]
mod slot_state_tests {
    use super::SlotState;
    use crate::digest::digest;
    use crate::testing::{Harness, START_MS};
    use crate::{Value, TRYAGAIN};
    use bytes::Bytes;
    use cluster::key_slot;
    use resp::Frame;

    fn bulk(text: &str) -> Frame {
        Frame::bulk(text.to_string())
    }

    fn tryagain() -> Frame {
        Frame::Error(Bytes::from_static(
            b"TRYAGAIN Multiple keys request during rehashing of slot",
        ))
    }

    /// A harness with keys in slot `{s}` (two of them), one in another slot.
    fn harness() -> (Harness, u16) {
        let mut h = Harness::new();
        h.set("{s}a", "1");
        h.set_value("{s}b", Value::list(["x", "y"]), None);
        h.set("other", "o");
        (h, key_slot(b"s"))
    }

    #[test]
    fn states_are_set_read_and_cleared() {
        let (mut h, slot) = harness();
        assert_eq!(h.keyspace.slot_state(slot), None);
        assert!(h.keyspace.slot_states().is_empty());
        h.keyspace.set_slot_state(slot, Some(SlotState::Frozen));
        h.keyspace.set_slot_state(3, Some(SlotState::Gone));
        assert_eq!(h.keyspace.slot_state(slot), Some(SlotState::Frozen));
        assert_eq!(h.keyspace.slot_state(3), Some(SlotState::Gone));
        assert_eq!(
            h.keyspace.slot_states().iter().collect::<Vec<_>>(),
            [(&3, &SlotState::Gone), (&slot, &SlotState::Frozen)]
        );
        h.keyspace.set_slot_state(slot, Some(SlotState::Gone));
        assert_eq!(h.keyspace.slot_state(slot), Some(SlotState::Gone));
        h.keyspace.set_slot_state(slot, None);
        h.keyspace.set_slot_state(3, None);
        assert!(h.keyspace.slot_states().is_empty());
        // No key hashes beyond the last slot: nothing is recorded there.
        h.keyspace.set_slot_state(16384, Some(SlotState::Gone));
        h.keyspace.set_slot_state(u16::MAX, Some(SlotState::Frozen));
        assert!(h.keyspace.slot_states().is_empty());
        assert_eq!(h.keyspace.drop_slot(16384), 0);
        assert!(h.keyspace.slot_states().is_empty());
    }

    #[test]
    fn the_refusal_is_redis_text() {
        assert_eq!(
            TRYAGAIN,
            "TRYAGAIN Multiple keys request during rehashing of slot"
        );
    }

    /// A frozen slot answers its writes TRYAGAIN without running them and serves
    /// its reads; keyless commands and other slots are untouched.
    #[test]
    fn a_frozen_slot_refuses_writes_and_serves_reads() {
        let (mut h, slot) = harness();
        h.keyspace.set_slot_state(slot, Some(SlotState::Frozen));
        let before = digest(&h.keyspace, START_MS);
        let dirty = h.keyspace.stats.dirty;
        for words in [
            &["SET", "{s}a", "2"][..],
            &["SET", "{s}new", "2"],
            &["DEL", "{s}a"],
            &["DEL", "{s}a", "{s}b"],
            &["INCR", "{s}a"],
            &["APPEND", "{s}a", "x"],
            &["EXPIRE", "{s}a", "100"],
            &["PERSIST", "{s}a"],
            &["GETDEL", "{s}a"],
            &["LPUSH", "{s}b", "z"],
            &["LPOP", "{s}b"],
            &["BLPOP", "{s}b", "0"],
            &["LMOVE", "{s}b", "{s}c", "LEFT", "RIGHT"],
            &["RENAME", "{s}a", "{s}z"],
            &["MSET", "{s}a", "1", "{s}c", "2"],
            &["SORT", "{s}b", "ALPHA", "STORE", "{s}d"],
            &["UNLINK", "{s}a"],
            &["RESTORE", "{s}r", "0", "x"],
        ] {
            assert_eq!(h.run(words), tryagain(), "{words:?}");
            assert_eq!(h.context.block, None, "{words:?}");
        }
        assert_eq!(digest(&h.keyspace, START_MS), before);
        assert_eq!(h.keyspace.stats.dirty, dirty);

        // Reads of the slot are served.
        assert_eq!(h.run(&["GET", "{s}a"]), bulk("1"));
        assert_eq!(
            h.run(&["MGET", "{s}a", "{s}missing"]),
            Frame::Array(vec![bulk("1"), Frame::Null])
        );
        assert_eq!(
            h.run(&["LRANGE", "{s}b", "0", "-1"]),
            Frame::Array(vec![bulk("x"), bulk("y")])
        );
        assert_eq!(h.run(&["EXISTS", "{s}a", "{s}b"]), Frame::Integer(2));
        assert_eq!(h.run(&["TTL", "{s}a"]), Frame::Integer(-1));
        assert_eq!(
            h.run(&["SORT_RO", "{s}b", "ALPHA"]),
            Frame::Array(vec![bulk("x"), bulk("y")])
        );
        // Keyless commands run, the slot commands included.
        assert_eq!(h.run(&["PING"]), Frame::simple("PONG"));
        assert_eq!(h.run(&["DBSIZE"]), Frame::Integer(3));
        assert_eq!(
            h.run(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
            Frame::Integer(2)
        );
        let Frame::Array(keys) = h.run(&["KEYS", "*"]) else {
            panic!("KEYS reply");
        };
        assert_eq!(keys.len(), 3);
        // Other slots are served, writes included.
        assert_eq!(h.run(&["SET", "other", "p"]), Frame::OK);
        assert_eq!(h.run(&["GET", "other"]), bulk("p"));
        assert_eq!(h.run(&["SET", "{t}x", "1"]), Frame::OK);
        // Flushes would reach into the frozen slot: refused. Keyless writes
        // that touch no key run (a reshard must not stall SCRIPT LOAD).
        assert_eq!(h.run(&["FLUSHALL"]), tryagain());
        assert_eq!(h.run(&["FLUSHDB"]), tryagain());
        for words in [&["SCRIPT", "FLUSH"][..], &["FUNCTION", "FLUSH"]] {
            assert_ne!(h.run(words), tryagain(), "{words:?}");
        }
        assert_eq!(h.run(&["EXISTS", "{s}a"]), Frame::Integer(1));

        // Back to serving: writes run again.
        h.keyspace.set_slot_state(slot, None);
        assert_eq!(h.run(&["SET", "{s}a", "2"]), Frame::OK);
        assert_eq!(h.run(&["GET", "{s}a"]), bulk("2"));
        assert_eq!(h.run(&["LPOP", "{s}b"]), bulk("x"));
    }

    /// A gone slot refuses every command with keys in it, reads included.
    #[test]
    fn a_gone_slot_refuses_reads_and_writes() {
        let (mut h, slot) = harness();
        // Even keys still stored (as before the drop) are not answered.
        h.keyspace.set_slot_state(slot, Some(SlotState::Gone));
        for words in [
            &["GET", "{s}a"][..],
            &["EXISTS", "{s}a"],
            &["TYPE", "{s}a"],
            &["TTL", "{s}a"],
            &["MGET", "{s}a", "{s}b"],
            &["LRANGE", "{s}b", "0", "-1"],
            &["DUMP", "{s}a"],
            &["OBJECT", "ENCODING", "{s}a"],
            &["SET", "{s}a", "2"],
            &["DEL", "{s}a"],
            &["BLPOP", "{s}b", "1"],
        ] {
            assert_eq!(h.run(words), tryagain(), "{words:?}");
        }
        assert_eq!(h.run(&["GET", "other"]), bulk("o"));
        assert_eq!(h.run(&["SET", "other", "p"]), Frame::OK);
        assert_eq!(h.run(&["PING"]), Frame::simple("PONG"));
        assert_eq!(h.run(&["DBSIZE"]), Frame::Integer(3));
        h.keyspace.set_slot_state(slot, None);
        assert_eq!(h.run(&["GET", "{s}a"]), bulk("1"));
        assert_eq!(h.run(&["SET", "{s}a", "2"]), Frame::OK);
    }

    /// States apply to every database alike (the refusal is per slot).
    #[test]
    fn states_apply_in_every_database() {
        let (mut h, slot) = harness();
        h.keyspace.set_slot_state(slot, Some(SlotState::Frozen));
        h.context.db = 3;
        assert_eq!(h.run(&["SET", "{s}a", "2"]), tryagain());
        assert_eq!(h.run(&["GET", "{s}a"]), Frame::Null);
        assert_eq!(h.run(&["SET", "other", "2"]), Frame::OK);
    }

    /// Fills databases 0 and 2 with keys of several slots (some with a TTL that
    /// has passed, still stored), optionally with the slot index.
    fn filled(indexed: bool) -> (Harness, u16) {
        let mut h = Harness::new();
        if indexed {
            h.keyspace.enable_slot_index();
        }
        for db in [0, 2] {
            h.context.db = db;
            for index in 0..200 {
                h.set(&format!("key:{index}"), "v");
                h.set(&format!("{{d}}{index}"), "v");
            }
            h.set_with_expiry("{d}expired", "v", START_MS + 1);
            h.set_with_expiry("other-expired", "v", START_MS + 1);
        }
        h.context.db = 0;
        h.advance(10);
        (h, key_slot(b"d"))
    }

    /// Every stored key of every database, with the slot of each.
    fn stored(h: &Harness) -> Vec<(usize, Vec<u8>)> {
        let mut keys: Vec<(usize, Vec<u8>)> = h
            .keyspace
            .dbs()
            .iter()
            .enumerate()
            .flat_map(|(db, data)| data.entries().map(move |(key, _)| (db, key.to_vec())))
            .collect();
        keys.sort();
        keys
    }

    #[test]
    fn drop_slot_removes_exactly_the_slot_keys() {
        for indexed in [false, true] {
            let (mut h, slot) = filled(indexed);
            let before = stored(&h);
            let expected: Vec<_> = before
                .iter()
                .filter(|(_, key)| key_slot(key) != slot)
                .cloned()
                .collect();
            let in_slot = before.len() - expected.len();
            // 201 per database (200 plus the expired one), and the "key:N"
            // names that happen to hash to the slot.
            assert!(in_slot >= 402, "{in_slot}");
            let dirty = h.keyspace.stats.dirty;
            assert_eq!(h.keyspace.drop_slot(slot), in_slot, "indexed {indexed}");
            assert_eq!(stored(&h), expected, "indexed {indexed}");
            assert_eq!(h.keyspace.stats.dirty, dirty + in_slot as u64);
            assert_eq!(h.keyspace.slot_state(slot), Some(SlotState::Gone));
            assert_eq!(h.keyspace.has_slot_index(), indexed);
            for (index, db) in h.keyspace.dbs().iter().enumerate() {
                assert!(db.slot_index_is_exact(), "indexed {indexed}");
                assert_eq!(db.count_keys_in_slot(slot), 0);
                assert!(db.keys_in_slot(slot, None, 10).is_empty());
                // Only other-expired keeps a TTL.
                let ttls = usize::from(index == 0 || index == 2);
                assert_eq!(db.expires_len(), ttls, "db {index}");
            }
            // Dropping again finds nothing; the state stays.
            assert_eq!(h.keyspace.drop_slot(slot), 0);
            assert_eq!(h.keyspace.slot_state(slot), Some(SlotState::Gone));
            // Importing the slot back: served and empty.
            h.keyspace.set_slot_state(slot, None);
            assert_eq!(h.run(&["GET", "{d}1"]), Frame::Null);
            assert_eq!(h.run(&["SET", "{d}1", "new"]), Frame::OK);
            assert_eq!(h.keyspace.count_keys_in_slot(0, slot), 1);
            assert!(h.keyspace.dbs().iter().all(|db| db.slot_index_is_exact()));
        }
    }

    /// Dropping in bounded steps deletes the first keys in byte order, marks
    /// the slot gone at once, and ends with exactly what one whole drop
    /// leaves, with and without the index.
    #[test]
    fn drop_slot_keys_deletes_in_bounded_steps() {
        for indexed in [false, true] {
            let (mut whole, slot) = filled(indexed);
            let (mut steps, _) = filled(indexed);
            let in_slot = whole.keyspace.drop_slot(slot);
            let mut total = 0;
            loop {
                let before = stored(&steps);
                let dropped = steps.keyspace.drop_slot_keys(slot, 150);
                assert!(dropped <= 150);
                assert_eq!(steps.keyspace.slot_state(slot), Some(SlotState::Gone));
                // The first keys of the slot, database by database.
                let mut gone: Vec<_> = before
                    .iter()
                    .filter(|entry| !stored(&steps).contains(entry))
                    .cloned()
                    .collect();
                gone.sort();
                let mut first: Vec<_> = before
                    .iter()
                    .filter(|(_, key)| key_slot(key) == slot)
                    .cloned()
                    .collect();
                first.sort();
                first.truncate(dropped);
                assert_eq!(gone, first, "indexed {indexed}");
                total += dropped;
                if dropped == 0 {
                    break;
                }
            }
            assert_eq!(total, in_slot);
            assert_eq!(stored(&steps), stored(&whole));
            assert!(steps
                .keyspace
                .dbs()
                .iter()
                .all(|db| db.slot_index_is_exact()));
        }
    }

    /// With and without the index, dropping leaves the same state: same keys,
    /// same table layouts, same digest.
    #[test]
    fn drop_slot_does_not_depend_on_the_index() {
        let (mut plain, slot) = filled(false);
        let (mut indexed, _) = filled(true);
        assert_eq!(
            plain.keyspace.drop_slot(slot),
            indexed.keyspace.drop_slot(slot)
        );
        for (first, second) in plain.keyspace.dbs().iter().zip(indexed.keyspace.dbs()) {
            assert_eq!(first.layout(), second.layout());
            let first: Vec<_> = first.entries().map(|(key, _)| key.to_vec()).collect();
            let second: Vec<_> = second.entries().map(|(key, _)| key.to_vec()).collect();
            assert_eq!(first, second);
        }
        let now = plain.context.now_ms;
        assert_eq!(digest(&plain.keyspace, now), digest(&indexed.keyspace, now));
    }

    /// A snapshot's copy: writes after it count the pages they copy, in
    /// every database, with expiry records, until the copy is dropped.
    #[test]
    fn a_snapshot_copy_counts_what_the_live_keyspace_copies_while_it_lives() {
        let (mut h, _) = filled(true);
        let snapshot = h.keyspace.clone_for_snapshot();
        assert_eq!(h.keyspace.snapshot_copy_bytes(), 0);
        h.context.db = 2;
        h.set("key:7", "changed");
        let one_page = h.keyspace.snapshot_copy_bytes();
        // A page of 256 buckets: about half of database 2's 402 keys.
        assert!(one_page > 150 * 60, "{one_page}");
        h.context.db = 0;
        h.set_with_expiry("key:8", "changed", START_MS + 60_000);
        // A page of database 0's keys and one of its expiry records.
        assert!(h.keyspace.snapshot_copy_bytes() > 2 * one_page);
        // The copy itself never changed.
        let before = h.get("key:8");
        let stored = |db: usize, key: &str| {
            snapshot
                .db_ref(db)
                .peek_stored(key.as_bytes())
                .map(|entry| entry.value.clone())
        };
        assert_eq!(stored(2, "key:7"), Some(Value::string(Bytes::from("v"))));
        assert_eq!(stored(0, "key:8"), Some(Value::string(Bytes::from("v"))));
        assert_ne!(before, stored(0, "key:8"));
        drop(snapshot);
        assert_eq!(h.keyspace.snapshot_copy_bytes(), 0);
        // A plain clone is not a snapshot's.
        let plain = h.keyspace.clone();
        h.set("key:9", "changed");
        assert_eq!(h.keyspace.snapshot_copy_bytes(), 0);
        drop(plain);
    }

    /// Cloning (the copy step of a snapshot) keeps the states.
    #[test]
    fn clones_keep_the_states() {
        let (mut h, slot) = harness();
        h.keyspace.set_slot_state(slot, Some(SlotState::Frozen));
        h.keyspace.set_slot_state(7, Some(SlotState::Gone));
        let copy = h.keyspace.clone();
        assert_eq!(copy.slot_states(), h.keyspace.slot_states());
    }
}
