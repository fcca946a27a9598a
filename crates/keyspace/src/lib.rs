//! The pure keyspace: databases, values, expiry and command execution.
//!
//! **Architecture Invariant:** nothing in this crate reads a clock, draws global
//! randomness, spawns, blocks or does I/O. Time and randomness arrive in a
//! [`Context`]; the same commands with the same contexts produce the same replies and
//! the same state on every replica.

pub mod args;
pub mod command;
pub mod commands;
pub mod db;
pub mod dict;
pub mod digest;
pub mod dump;
pub mod errors;
pub mod glob;
mod keyspace;
pub mod rng;
#[cfg(test)]
mod testing;
pub mod value;

pub use command::{CommandSpec, Handler};
pub use db::{Db, Entry};
pub use keyspace::{Context, Keyspace, KeyspaceConfig, Stats};
pub use rng::Rng;
pub use value::{StringValue, Value};

use bytes::Bytes;
use resp::Frame;

impl Keyspace {
    /// Runs a resolved command (see [`commands::resolve`]). Node-handled commands
    /// are refused here; the node runs them itself.
    pub fn execute(
        &mut self,
        spec: &CommandSpec,
        context: &mut Context,
        arguments: &[Bytes],
    ) -> Frame {
        match spec.handler {
            Handler::Keyspace(run) => run(self, context, arguments),
            Handler::Node | Handler::Container => {
                Frame::error_owned(format!("ERR command '{}' is not available here", spec.name))
            }
        }
    }
}
