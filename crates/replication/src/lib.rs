//! Raft replication of the keyspace.
//!
//! Each shard is one openraft group whose state machine is a
//! [`keyspace::Keyspace`]. Log entries carry commands with the leader's time and a
//! seed, so applying them is deterministic on every replica.

pub mod codec;
pub mod group;
pub mod log_store;
pub mod meta;
pub mod network;
pub mod runtime;
pub mod serve;
pub mod state_machine;
pub mod types;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod scratch;

pub use types::{GroupId, NodeAddr, NodeId, Op, Request, Response, TypeConfig};
