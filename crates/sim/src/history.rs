//! What the clients did and saw: one record per operation, with the simulated
//! times it was invoked and completed.

use std::sync::{Arc, Mutex};

/// An operation a client issued on one key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// `SET key value` (every value written is unique).
    Set(String),
    /// `GET key`
    Get,
    /// `INCR key`
    Incr,
    /// `SADD key member`
    SAdd(String),
    /// `SMEMBERS key` (observed sorted)
    SMembers,
    /// `RPUSH key element`
    RPush(String),
    /// `LRANGE key 0 -1`
    LRange,
    /// `BLPOP key 0.5`: waits up to half a second for an element (observed:
    /// the key and the element, or nil when it timed out). Only on the real
    /// node, whose blocked clients are served through the log.
    BLPop,
    /// `MULTI; DECRBY {key}a n; INCRBY {key}b n; EXEC`: moves `n` between the
    /// two accounts of one slot (observed: both new balances).
    Transfer(i64),
    /// `MULTI; GET {key}a; GET {key}b; EXEC` (observed: both balances).
    Audit,
    /// The sliding-window rate limiter (`EVAL` over a sorted set, with the
    /// entry's time from `TIME`) asked to admit `member` (observed: 1 or 0
    /// and the time it ran at, in ms).
    Limit(String),
}

impl Call {
    /// Reads change nothing, so an unknown outcome constrains nothing.
    pub fn is_read(&self) -> bool {
        matches!(
            self,
            Call::Get | Call::SMembers | Call::LRange | Call::Audit
        )
    }

    /// Transactions go through the log as one entry, reads among them too.
    pub fn through_log(&self) -> bool {
        !self.is_read() || *self == Call::Audit
    }
}

/// A reply, reduced to what the checkers compare.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Observed {
    Ok,
    Nil,
    Bulk(String),
    Integer(i64),
    Elements(Vec<String>),
}

/// How an operation ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Acknowledged with this reply.
    Done(Observed),
    /// Refused before it was proposed: it did not happen.
    Failed,
    /// Proposed, then its fate became unknown: it may or may not have happened.
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Operation {
    pub client: u64,
    pub key: String,
    pub call: Call,
    /// Simulated nanoseconds since the start.
    pub invoked: u64,
    pub completed: u64,
    pub outcome: Outcome,
    /// The replica that answered last (0 when none did).
    pub node: u64,
}

/// The shared record of a run.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Vec<Operation>>>);

impl History {
    pub fn record(&self, operation: Operation) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(operation);
    }

    pub fn operations(&self) -> Vec<Operation> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Simulated nanoseconds since the start of the run.
pub fn now_ns() -> u64 {
    turmoil::sim_elapsed().unwrap_or_default().as_nanos() as u64
}
