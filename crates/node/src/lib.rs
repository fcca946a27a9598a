//! The slotraft node as a library: the `slotraft` binary (`main.rs`) parses
//! the command line and runs it; the simulation runs the same node code on
//! simulated hosts.

pub mod acl;
pub mod admin;
pub mod alloc;
pub mod blocking;
pub mod busy;
pub mod clients;
pub mod clock;
pub mod cluster_commands;
pub mod cluster_node;
pub mod config;
pub mod connection;
pub mod dev;
pub mod diagnostics;
pub mod evict;
pub mod info;
pub mod local;
pub mod migrate;
pub mod pause;
pub mod persist;
pub mod pubsub;
pub mod replica;
pub mod replicated;
pub mod resp_client;
pub mod role;
pub mod router;
pub mod server;
pub mod session;
pub mod stats;
pub mod tracking;
