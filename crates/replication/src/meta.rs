//! The metadata group's state: the cluster topology and each shard's current
//! leader, kept in the group's keyspace under reserved keys of database 0, and
//! changed only by [`Op::PutTopology`] and [`Op::PutLeader`] entries.
//!
//! The topology is opaque here (the `cluster` crate's encoding) with its epoch
//! beside it: a change names the epoch it was computed from and is refused if
//! another change came first, so concurrent admin operations cannot overwrite
//! each other. Leaders are recorded with their Raft term and only ever move
//! forward in (term, node id), the order of openraft's leader ids, so a late
//! report from an old leader cannot win.

use crate::state_machine::ShardState;
use crate::Op;
use bytes::Bytes;
use keyspace::{Context, Keyspace};
use resp::Frame;
use std::collections::BTreeMap;

/// The key holding the topology: 8 bytes of big-endian epoch, then the bytes.
pub const TOPOLOGY_KEY: &[u8] = b"\x00slotraft:topology";
/// The hash of shard id -> "node term".
pub const LEADERS_KEY: &[u8] = b"\x00slotraft:leaders";

/// A shard's leader as last reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderRecord {
    pub node: u64,
    pub term: u64,
}

fn run(keyspace: &mut Keyspace, context: &mut Context, words: &[&[u8]]) -> Frame {
    let arguments: Vec<Bytes> = words
        .iter()
        .map(|word| Bytes::copy_from_slice(word))
        .collect();
    match keyspace::commands::resolve(&arguments) {
        Ok(spec) => keyspace.execute(spec, context, &arguments),
        Err(error) => error,
    }
}

fn read_string(keyspace: &mut Keyspace, context: &mut Context, key: &[u8]) -> Option<Bytes> {
    match run(keyspace, context, &[b"GET", key]) {
        Frame::Bulk(data) => Some(data),
        _ => None,
    }
}

/// The stored topology: its epoch and bytes.
pub fn topology(state: &mut ShardState) -> Option<(u64, Bytes)> {
    let mut context = read_context(state);
    let stored = read_string(&mut state.keyspace, &mut context, TOPOLOGY_KEY)?;
    split_topology(&stored)
}

fn split_topology(stored: &Bytes) -> Option<(u64, Bytes)> {
    let epoch = u64::from_be_bytes(stored.get(..8)?.try_into().ok()?);
    Some((epoch, stored.slice(8..)))
}

/// Every shard's last reported leader.
pub fn leaders(state: &mut ShardState) -> BTreeMap<u64, LeaderRecord> {
    let mut context = read_context(state);
    let mut out = BTreeMap::new();
    let pairs: Vec<(Frame, Frame)> = match run(
        &mut state.keyspace,
        &mut context,
        &[b"HGETALL", LEADERS_KEY],
    ) {
        Frame::Map(pairs) => pairs,
        Frame::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [field, value] => Some((field.clone(), value.clone())),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for (shard, record) in pairs {
        if let (Frame::Bulk(shard), Frame::Bulk(record)) = (shard, record) {
            if let (Some(shard), Some(record)) = (parse_u64(&shard), parse_record(&record)) {
                out.insert(shard, record);
            }
        }
    }
    out
}

/// A context for reading the reserved keys: they never expire, so the time
/// does not matter, and nothing is deleted.
fn read_context(state: &ShardState) -> Context {
    let mut context = Context::new(state.log_time_ms, 0);
    context.lazy_expire = false;
    context
}

fn parse_u64(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

fn parse_record(text: &[u8]) -> Option<LeaderRecord> {
    let text = std::str::from_utf8(text).ok()?;
    let (node, term) = text.split_once(' ')?;
    Some(LeaderRecord {
        node: node.parse().ok()?,
        term: term.parse().ok()?,
    })
}

/// Applies a metadata op; the reply is `:1` when it took effect, `:0` when it
/// was refused (stale epoch, older leadership).
pub fn apply(state: &mut ShardState, context: &mut Context, op: &Op) -> Frame {
    match op {
        Op::PutTopology {
            expected_epoch,
            epoch,
            topology,
        } => {
            let current = read_string(&mut state.keyspace, context, TOPOLOGY_KEY)
                .as_ref()
                .and_then(split_topology)
                .map_or(0, |(epoch, _)| epoch);
            if current != *expected_epoch || epoch <= expected_epoch {
                return Frame::Integer(0);
            }
            let mut value = epoch.to_be_bytes().to_vec();
            value.extend_from_slice(topology);
            run(
                &mut state.keyspace,
                context,
                &[b"SET", TOPOLOGY_KEY, &value],
            );
            Frame::Integer(1)
        }
        Op::PutLeader { shard, node, term } => {
            let field = shard.to_string();
            let known = match run(
                &mut state.keyspace,
                context,
                &[b"HGET", LEADERS_KEY, field.as_bytes()],
            ) {
                Frame::Bulk(record) => parse_record(&record),
                _ => None,
            };
            // Leaderships are ordered by (term, node): a term may see a
            // second leader with a higher node id (openraft's default
            // leader ids), which supersedes the first.
            if known.is_some_and(|known| (known.term, known.node) >= (*term, *node)) {
                return Frame::Integer(0);
            }
            let record = format!("{node} {term}");
            run(
                &mut state.keyspace,
                context,
                &[b"HSET", LEADERS_KEY, field.as_bytes(), record.as_bytes()],
            );
            Frame::Integer(1)
        }
        Op::Exec { .. }
        | Op::ExecOutOfMemory { .. }
        | Op::Batch(_)
        | Op::ExpireTick
        | Op::SlotState { .. }
        | Op::DropSlot { .. }
        | Op::DropSlotKeys { .. }
        | Op::Evict { .. } => Frame::error("ERR not a metadata operation"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::Rng;

    fn state() -> ShardState {
        ShardState {
            keyspace: Keyspace::new(1, 7),
            last_applied: None,
            membership: Default::default(),
            log_time_ms: 1_000,
            rng: Rng::new(1),
        }
    }

    fn put(state: &mut ShardState, expected_epoch: u64, epoch: u64, data: &[u8]) -> Frame {
        let mut context = Context::new(1_000, 1);
        let op = Op::PutTopology {
            expected_epoch,
            epoch,
            topology: Bytes::copy_from_slice(data),
        };
        apply(state, &mut context, &op)
    }

    fn lead(state: &mut ShardState, shard: u64, node: u64, term: u64) -> Frame {
        let mut context = Context::new(1_000, 1);
        apply(state, &mut context, &Op::PutLeader { shard, node, term })
    }

    #[test]
    fn topology_changes_only_from_the_current_epoch() {
        let mut state = state();
        assert_eq!(topology(&mut state), None);
        assert_eq!(put(&mut state, 0, 1, b"first"), Frame::Integer(1));
        assert_eq!(
            topology(&mut state),
            Some((1, Bytes::from_static(b"first")))
        );
        // Computed from an epoch that is gone: refused.
        assert_eq!(put(&mut state, 0, 2, b"stale"), Frame::Integer(0));
        // Epochs only grow.
        assert_eq!(put(&mut state, 1, 1, b"same"), Frame::Integer(0));
        assert_eq!(put(&mut state, 1, 2, b"second"), Frame::Integer(1));
        assert_eq!(
            topology(&mut state),
            Some((2, Bytes::from_static(b"second")))
        );
    }

    #[test]
    fn leaders_only_move_forward_in_term_then_node() {
        let mut state = state();
        assert_eq!(lead(&mut state, 3, 2, 5), Frame::Integer(1));
        assert_eq!(lead(&mut state, 4, 2, 1), Frame::Integer(1));
        assert_eq!(lead(&mut state, 3, 3, 4), Frame::Integer(0));
        assert_eq!(lead(&mut state, 3, 1, 5), Frame::Integer(0));
        assert_eq!(lead(&mut state, 3, 2, 5), Frame::Integer(0));
        // A second leader of term 5, elected after node 2's leadership.
        assert_eq!(lead(&mut state, 3, 3, 5), Frame::Integer(1));
        assert_eq!(lead(&mut state, 3, 1, 6), Frame::Integer(1));
        let leaders = leaders(&mut state);
        assert_eq!(leaders[&3], LeaderRecord { node: 1, term: 6 });
        assert_eq!(leaders[&4], LeaderRecord { node: 2, term: 1 });
    }
}
