//! Deterministic simulation of slotraft's replication under turmoil.
//!
//! The real replication stack (openraft, the durable log store, the keyspace
//! state machine, the tonic transport, and the request path's read check and
//! write classification in `replication::serve`) runs on simulated hosts; only
//! sockets and time are turmoil's, and the log's files live on a [`disk`] that
//! loses unsynced writes when its host crashes. [`net`] plugs the simulated network into the
//! rpc crate's seams; [`group`] runs a shard group's replicas as hosts;
//! [`client`] issues operations and records them in a [`history`]; [`faults`]
//! draws a fault schedule from the seed; [`run`] runs one seed and applies the
//! checkers of [`check`]; [`sweep`] runs many seeds in parallel.

pub mod changes;
pub mod check;
pub mod client;
pub mod disk;
pub mod faults;
pub mod group;
pub mod history;
pub mod net;
pub mod node_host;
pub mod rng;
pub mod run;
pub mod sweep;
pub mod trace;
