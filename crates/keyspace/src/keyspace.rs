//! The keyspace: the databases, statistics, and the context every command runs in.

use crate::db::{Db, Entry};
use crate::rng::Rng;
use crate::value::Value;
use resp::Protocol;

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
}

impl Context {
    pub fn new(now_ms: u64, seed: u64) -> Self {
        Context {
            now_ms,
            rng: Rng::new(seed),
            db: 0,
            protocol: Protocol::Resp2,
            cluster_mode: false,
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
}

impl Default for KeyspaceConfig {
    fn default() -> Self {
        KeyspaceConfig {
            max_string_bytes: 512 * 1024 * 1024,
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time_minutes: 1,
        }
    }
}

/// Counters reported by INFO stats.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    /// Writes since start (INFO persistence `rdb_changes_since_last_save`).
    pub dirty: u64,
}

/// Redis's LFU_INIT_VAL: the counter a new key starts with.
const LFU_INITIAL_COUNTER: u32 = 5;

pub struct Keyspace {
    dbs: Vec<Db>,
    pub config: KeyspaceConfig,
    pub stats: Stats,
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
        }
    }

    pub fn database_count(&self) -> usize {
        self.dbs.len()
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

    pub fn swap_dbs(&mut self, first: usize, second: usize) {
        self.dbs.swap(first, second);
    }

    /// Looks a key up for a read command: counts a hit or miss and records the
    /// access.
    pub fn read(&mut self, context: &mut Context, key: &[u8]) -> Option<&mut Entry> {
        match self.dbs[context.db].get_mut(key, context.now_ms) {
            Some(entry) => {
                self.stats.keyspace_hits += 1;
                entry.access = next_access(&self.config, entry.access, context);
                Some(entry)
            }
            None => {
                self.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Looks a key up for a write command: records the access, counts nothing.
    pub fn lookup_write(&mut self, context: &mut Context, key: &[u8]) -> Option<&mut Entry> {
        let lfu = self.config.lfu;
        let entry = self.dbs[context.db].get_mut(key, context.now_ms)?;
        if !lfu {
            entry.access = lru_clock(context);
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
        let access = self.initial_access(context);
        let db = &mut self.dbs[context.db];
        // Overwriting a key that had already expired counts as its expiry, as when
        // Redis's SET looks the key up first.
        if let Some(replaced) = db.set(key, value, expire_at_ms, access) {
            if replaced.is_expired(context.now_ms) {
                db.expired_keys += 1;
            }
        }
        self.stats.dirty += 1;
    }

    /// Replaces a value keeping the key's TTL, counting one change.
    pub fn set_keep_ttl(&mut self, context: &mut Context, key: &[u8], value: Value) {
        let access = self.initial_access(context);
        self.dbs[context.db].set_keep_ttl(key, value, access);
        self.stats.dirty += 1;
    }

    /// Deletes a live key from the selected database; true if it existed.
    pub fn delete(&mut self, context: &mut Context, key: &[u8]) -> bool {
        let db = &mut self.dbs[context.db];
        if !db.contains(key, context.now_ms) {
            return false;
        }
        db.remove(key);
        self.stats.dirty += 1;
        true
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

fn lru_clock(context: &Context) -> u32 {
    context.now_seconds() as u32
}

fn lfu_minutes(context: &Context) -> u32 {
    ((context.now_ms / 60_000) & 0xFFFF) as u32
}

fn lfu_decayed_counter(config: &KeyspaceConfig, access: u32, context: &Context) -> u32 {
    let last_minutes = access >> 8;
    let counter = access & 0xFF;
    let now_minutes = lfu_minutes(context);
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

/// Access data after one read: the LRU clock, or the LFU counter decayed and then
/// incremented with probability 1 / ((counter - 5) * lfu-log-factor + 1).
fn next_access(config: &KeyspaceConfig, access: u32, context: &mut Context) -> u32 {
    if !config.lfu {
        return lru_clock(context);
    }
    let mut counter = lfu_decayed_counter(config, access, context);
    if counter < 255 {
        let base = counter.saturating_sub(LFU_INITIAL_COUNTER) as f64;
        let probability = 1.0 / (base * config.lfu_log_factor as f64 + 1.0);
        if context.rng.unit_f64() < probability {
            counter += 1;
        }
    }
    (lfu_minutes(context) << 8) | counter
}
