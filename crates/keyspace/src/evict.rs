//! Choosing keys to evict under `maxmemory`, by Redis's eight policies and
//! its sampling approximation.
//!
//! The keyspace does not know how much memory the process uses; the node
//! does, and asks for one victim at a time until it is back under the limit
//! ([`Keyspace::eviction_victim`]), then deletes it ([`Keyspace::evict`]).
//! Under replication the leader chooses (its access data, its memory) and
//! the chosen keys travel in a log entry, so every replica deletes the same
//! keys.

use crate::notify;
use crate::{Context, Keyspace, Rng};
use bytes::Bytes;

/// `maxmemory-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    pub fn parse(name: &str) -> Option<Policy> {
        Some(match name {
            "noeviction" => Policy::NoEviction,
            "allkeys-lru" => Policy::AllKeysLru,
            "allkeys-lfu" => Policy::AllKeysLfu,
            "allkeys-random" => Policy::AllKeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => return None,
        })
    }

    /// Whether only keys with a TTL are candidates.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }
}

/// The `maxmemory` settings in force (the node fills it from its
/// configuration; the keyspace itself never measures memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    pub max_bytes: usize,
    pub policy: Policy,
    /// `maxmemory-samples`: keys drawn per database for each victim.
    pub samples: usize,
}

/// Redis's OOM reply for a write refused under `maxmemory`.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

impl Keyspace {
    /// The next key to evict under `policy`: `samples` keys drawn at random
    /// from each database (from its keys with a TTL for the volatile
    /// policies), and the best victim among them: the longest idle (LRU), the
    /// least frequently used (LFU), the soonest to expire (TTL), or the first
    /// drawn (random). `None` when the policy evicts nothing or no key is a
    /// candidate.
    pub fn eviction_victim(
        &self,
        policy: Policy,
        samples: usize,
        rng: &mut Rng,
        context: &Context,
    ) -> Option<(usize, Bytes)> {
        if policy == Policy::NoEviction {
            return None;
        }
        let mut best: Option<(u64, usize, Bytes)> = None;
        for (index, db) in self.dbs.iter().enumerate() {
            for _ in 0..samples.max(1) {
                let key = if policy.volatile() {
                    db.random_volatile_key(rng)
                } else {
                    db.random_stored_key(rng)
                };
                let Some(key) = key else {
                    break;
                };
                let Some(entry) = db.peek_stored(&key) else {
                    continue;
                };
                // Higher scores are better victims.
                let score = match policy {
                    Policy::AllKeysLru | Policy::VolatileLru => self.idle_seconds(entry, context),
                    Policy::AllKeysLfu | Policy::VolatileLfu => {
                        255 - u64::from(self.lfu_counter(entry, context).min(255))
                    }
                    Policy::VolatileTtl => u64::MAX - entry.expire_at_ms().unwrap_or(u64::MAX),
                    Policy::AllKeysRandom | Policy::VolatileRandom => 0,
                    Policy::NoEviction => return None,
                };
                if best.as_ref().is_none_or(|(top, _, _)| score > *top) {
                    best = Some((score, index, Bytes::from(key)));
                }
                if matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom) {
                    break;
                }
            }
        }
        best.map(|(_, db, key)| (db, key))
    }

    /// Deletes an evicted key (if still there): counts it in `evicted_keys`
    /// and raises the `evicted` keyspace event. Answers whether it existed.
    pub fn evict(&mut self, db: usize, key: &[u8]) -> bool {
        if db >= self.dbs.len() {
            return false;
        }
        let Some(entry) = self.dbs[db].remove(key) else {
            return false;
        };
        // A client blocked in XREADGROUP on an evicted stream runs again.
        if matches!(entry.value, crate::value::Value::Stream(_)) {
            self.signal_ready(db, key);
        }
        self.stats.evicted_keys += 1;
        self.stats.dirty += 1;
        if self.config.tracking_on() {
            self.invalidations.push(&Bytes::copy_from_slice(key), false);
        }
        if self.config.notify_flags & notify::class::EVICTED != 0 {
            let key = Bytes::copy_from_slice(key);
            self.record_event(db, notify::class::EVICTED, "evicted", &key);
        }
        true
    }
}
