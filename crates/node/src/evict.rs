//! `maxmemory`: evicting keys before writes while the process uses more than
//! the limit, and Redis's OOM reply when nothing more can go.
//!
//! Memory is the counting allocator's live bytes (`used_memory`). The
//! keyspace chooses victims by the policy ([`keyspace::evict`]); a standalone
//! node deletes them at once, a shard leader proposes them in one log entry
//! (`Op::Evict`) so every replica deletes the same keys, whatever its own
//! access data or memory says. Followers never evict on their own.

use std::time::Duration;

use keyspace::evict::Policy;
use keyspace::{Context, Keyspace};
use replication::state_machine::lock;
use replication::{Op, Request};

use crate::alloc;
use crate::clock;
use crate::replica::Replica;
use crate::server::Shared;

/// Victims chosen per round (one log entry on a replica).
const VICTIMS_PER_ROUND: usize = 32;
/// Most eviction rounds before one write; memory that does not come down
/// (held outside the keyspace) must not stall writes forever.
const MAX_ROUNDS: usize = 64;

/// The `maxmemory` settings as the keyspace keeps them.
pub type Limit = keyspace::evict::MemoryLimit;

/// The settings from the node's configuration (`None` without a limit).
pub fn limit_from(config: &crate::config::Config) -> Option<Limit> {
    let max_bytes: usize = config
        .get("maxmemory")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    if max_bytes == 0 {
        return None;
    }
    Some(Limit {
        max_bytes,
        policy: config
            .get("maxmemory-policy")
            .and_then(Policy::parse)
            .unwrap_or(Policy::NoEviction),
        samples: config
            .get("maxmemory-samples")
            .and_then(|value| value.parse().ok())
            .unwrap_or(5),
    })
}

/// A standalone node's memory as compared with the limit: the process's,
/// less what a save's copy of the keyspace holds (the pages the live
/// keyspace copied since, included), as Redis never counts its forked
/// child's.
fn over(limit: &Limit, keyspace: &Keyspace) -> bool {
    (alloc::counted_bytes() as u64).saturating_sub(keyspace.snapshot_copy_bytes())
        > limit.max_bytes as u64
}

/// A replica's memory as compared with the limit: the process's, less what
/// its groups' Raft logs hold in memory (as Redis leaves replication and AOF
/// buffers out) and what their snapshot builds hold alone (pages the live
/// keyspaces copied while a snapshot's copy shared them, as Redis leaves
/// out its forked child's copy-on-write pages).
fn over_replicated(limit: &Limit, held_elsewhere: u64) -> bool {
    (alloc::allocated_bytes() as u64).saturating_sub(held_elsewhere) > limit.max_bytes as u64
}

/// Standalone: evicts until memory is under the limit; true when it is
/// still over (nothing left to evict).
fn make_room(keyspace: &mut Keyspace, rng: &mut keyspace::Rng, limit: &Limit) -> bool {
    let context = Context::new(clock::unix_ms(), rng.next_u64());
    for _ in 0..MAX_ROUNDS * VICTIMS_PER_ROUND {
        if !over(limit, keyspace) {
            return false;
        }
        let Some((db, key)) = keyspace.eviction_victim(limit.policy, limit.samples, rng, &context)
        else {
            return true;
        };
        keyspace.evict(db, &key);
    }
    over(limit, keyspace)
}

/// Standalone: whether a write now meets OOM (evicting first, as before any
/// write); false without a limit, and while CLIENT PAUSE is on (Redis skips
/// eviction then, as if memory were under the limit).
pub fn out_of_memory(shared: &Shared, state: &mut replication::state_machine::ShardState) -> bool {
    if shared.local.pause.keys_frozen() {
        return false;
    }
    match state.keyspace.config.max_memory {
        Some(limit) => make_room(&mut state.keyspace, &mut state.rng, &limit),
        None => false,
    }
}

/// A shard leader: whether a write now meets OOM (proposing evictions first);
/// false without a limit, when not leading, and while CLIENT PAUSE is on.
pub async fn out_of_memory_replicated(shared: &Shared, replica: &Replica) -> bool {
    if shared.local.pause.keys_frozen() {
        return false;
    }
    let limit = limit_from(&shared.config());
    match limit {
        Some(limit) if replica.group.raft.is_leader() => {
            make_room_replicated(shared, replica, &limit).await
        }
        _ => false,
    }
}

/// A shard leader: proposes evictions until memory is under the limit; true
/// when it is still over.
async fn make_room_replicated(shared: &Shared, replica: &Replica, limit: &Limit) -> bool {
    let held = |replica: &Replica| -> u64 {
        replica.group.log.memory_bytes() + lock(&replica.group.state).keyspace.snapshot_copy_bytes()
    };
    let held_elsewhere = || -> u64 {
        match (&shared.cluster, &shared.replica) {
            (Some(node), _) => node
                .local_shards()
                .iter()
                .map(|replica| held(replica))
                .sum(),
            (None, Some(replica)) => held(replica),
            (None, None) => 0,
        }
    };
    for _ in 0..MAX_ROUNDS {
        if !over_replicated(limit, held_elsewhere()) {
            return false;
        }
        let (keys, seed) = {
            let mut state = lock(&replica.group.state);
            let now_ms = clock::unix_ms().max(state.log_time_ms);
            let seed = state.rng.next_u64();
            let mut rng = keyspace::Rng::new(state.rng.next_u64());
            let context = Context::new(now_ms, seed);
            let mut keys: Vec<(u32, bytes::Bytes)> = Vec::new();
            // Without deleting, sampling may draw the same keys again: a
            // bounded number of draws, duplicates skipped.
            for _ in 0..VICTIMS_PER_ROUND * 4 {
                match state.keyspace.eviction_victim(
                    limit.policy,
                    limit.samples,
                    &mut rng,
                    &context,
                ) {
                    Some((db, key)) => {
                        if !keys.iter().any(|(d, k)| *d as usize == db && *k == key) {
                            keys.push((db as u32, key));
                        }
                    }
                    None => break,
                }
                if keys.len() >= VICTIMS_PER_ROUND {
                    break;
                }
            }
            (keys, seed)
        };
        if keys.is_empty() {
            return true;
        }
        let request = Request::new(clock::unix_ms(), seed, Op::Evict { keys });
        let write = replica
            .group
            .raft
            .client_write(std::sync::Arc::new(request));
        if !matches!(
            tokio::time::timeout(Duration::from_secs(5), write).await,
            Ok(Ok(_))
        ) {
            return over_replicated(limit, held_elsewhere());
        }
    }
    over_replicated(limit, held_elsewhere())
}
