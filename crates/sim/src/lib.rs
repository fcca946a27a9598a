//! Deterministic simulation of slotraft's replication under turmoil.
//!
//! The real replication stack (openraft, the durable log store, the keyspace
//! state machine, the tonic transport) runs on simulated hosts; only sockets and
//! time are turmoil's. [`net`] plugs the simulated network into the rpc crate's
//! seams; [`group`] runs a shard group's replicas as hosts and gives the test
//! driver handles on them.

pub mod group;
pub mod net;
